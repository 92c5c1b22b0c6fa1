package main

import (
	"context"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"
)

// model is the backend's shape and the run's time scale.
type model struct {
	slots    int
	median   time.Duration // simulated
	deadline time.Duration // the clients' deadline, simulated
	scale    float64       // real time runs this many times faster
}

// capacity returns the backend's capacity at full slots, requests per
// simulated second: slots / mean service time.
func (m model) capacity() float64 { return float64(m.slots) / (1.146 * m.median.Seconds()) }

// real converts a simulated duration to real time.
func (m model) real(d time.Duration) time.Duration { return time.Duration(float64(d) / m.scale) }

// sim converts a real duration to simulated time.
func (m model) sim(d time.Duration) time.Duration { return time.Duration(float64(d) * m.scale) }

// A scenario is a load pattern on the backend, in simulated time after
// the warm-up.
type scenario struct {
	name, title string
	duration    time.Duration
	load        float64                   // arrival rate, × capacity
	critical    float64                   // share of requests critical; 0: no priorities
	giveUpShare float64                   // share of clients that give up early
	giveUp      time.Duration             // when they do
	slots       func(t time.Duration) int // nil: constant
	phases      []time.Duration           // when capacity changes
}

const warmup = 5 * time.Second

// warmConns is how many connections a run opens before it starts.
const warmConns = 256

func scenarios(m model) []scenario {
	half, back := 8*time.Second, 16*time.Second
	return []scenario{
		{name: "overload", title: "10× overload", duration: 10 * time.Second, load: 10},
		{name: "light", title: "0.5× load", duration: 20 * time.Second, load: 0.5},
		{name: "halves", title: "10× load, capacity halves at 8 s and returns at 16 s", duration: 26 * time.Second, load: 10,
			slots: func(t time.Duration) int {
				if t >= half && t < back {
					return m.slots / 2
				}
				return m.slots
			}, phases: []time.Duration{half, back}},
		{name: "priorities", title: "3× overload, critical traffic 0.6× capacity", duration: 10 * time.Second, load: 3, critical: 0.2},
		{name: "disconnects", title: "10× overload, 20% of clients give up after 50 ms", duration: 10 * time.Second, load: 10,
			giveUpShare: 0.2, giveUp: 50 * time.Millisecond},
	}
}

// result is one request, in simulated time since the measured start
// (negative during the warm-up).
type result struct {
	at, lat  time.Duration // sent; answered after
	status   int           // 0: the client gave up (deadline or early)
	critical bool
}

// sample is the state every 100 ms of simulated time.
type sample struct {
	at       time.Duration
	limit    float64 // -1: no limit
	inflight int64
	slots    int
}

// outcome is one target's run of one scenario.
type outcome struct {
	sc      scenario
	target  string
	m       model
	results []result // measured ones only
	samples []sample
}

// unloadedP99 returns the p99 latency of the backend at a tenth of its
// capacity with no limit.
func (m model) unloadedP99() (time.Duration, error) {
	o, err := m.run(scenario{name: "unloaded", duration: 10 * time.Second, load: 0.1}, "none", 0)
	if err != nil {
		return 0, err
	}
	return o.p99(), nil
}

// run runs sc against the target called name.
func (m model) run(sc scenario, name string, fixed int64) (*outcome, error) {
	tg, err := newTarget(name, fixed)
	if err != nil {
		return nil, err
	}
	defer tg.close()
	be := newBackend(m.slots, m.real(m.median))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/", tg.wrap(be))
	mux.HandleFunc("/warm", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(10 * time.Millisecond) // hold the connection while the others dial
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	defer srv.Close()
	tr := &http.Transport{MaxIdleConns: 8192, MaxIdleConnsPerHost: 8192, IdleConnTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	url := "http://" + ln.Addr().String() + "/"
	// Open the connections a burst needs before the clock starts, so
	// that dialling is not measured as the limit's latency: every target
	// then starts with the same pool.
	var warm sync.WaitGroup
	for range warmConns {
		warm.Go(func() {
			if resp, err := client.Get(url + "warm"); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	warm.Wait()

	o := &outcome{sc: sc, target: name, m: m}
	var mu sync.Mutex
	var wg sync.WaitGroup
	total := warmup + sc.duration
	begin := time.Now()
	simNow := func() time.Duration { return m.sim(time.Since(begin)) - warmup }
	done := make(chan struct{})

	// The sampler, which also changes the capacity.
	go func() {
		tick := time.NewTicker(m.real(100 * time.Millisecond))
		defer tick.Stop()
		slots := m.slots
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			t := simNow()
			if sc.slots != nil && t >= 0 {
				if n := sc.slots(t); n != slots {
					slots = n
					be.SetSlots(n)
				}
			}
			s := sample{at: t, limit: -1, inflight: be.inflight.Load(), slots: slots}
			if tg.limit != nil {
				s.limit = tg.limit()
			}
			mu.Lock()
			o.samples = append(o.samples, s)
			mu.Unlock()
		}
	}()

	// Open-loop Poisson arrivals: each request is sent at its scheduled
	// time, whatever became of the earlier ones.
	rng := rand.New(rand.NewPCG(uint64(len(sc.name)), uint64(len(name))))
	next := time.Duration(0) // simulated, since begin
	for next < total {
		t := next - warmup
		load, crit, giveUpShare := sc.load, sc.critical, sc.giveUpShare
		if t < 0 {
			load, crit, giveUpShare = 0.5, 0, 0
		}
		rate := load * m.capacity()
		next += time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
		if d := m.real(next) - time.Since(begin); d > 0 {
			time.Sleep(d)
		}
		critical := crit == 0 || rng.Float64() < crit
		deadline := m.deadline
		if giveUpShare > 0 && rng.Float64() < giveUpShare {
			deadline = sc.giveUp
		}
		wg.Add(1)
		go func(sent time.Duration) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), m.real(deadline))
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if !critical {
				req.Header.Set(priorityHeader, "sheddable")
			}
			startReal := time.Now()
			status := 0
			if resp, err := client.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				status = resp.StatusCode
			}
			lat := m.sim(time.Since(startReal))
			if sent < 0 {
				return
			}
			mu.Lock()
			o.results = append(o.results, result{at: sent, lat: lat, status: status, critical: critical})
			mu.Unlock()
		}(t)
	}
	wg.Wait()
	close(done)
	mu.Lock()
	defer mu.Unlock()
	slices.SortFunc(o.results, func(a, b result) int { return int(a.at - b.at) })
	return o, nil
}

// served reports whether r is goodput: a 200 within the client's deadline.
func (r *result) served() bool { return r.status == 200 }

// shed reports whether the limit refused r.
func (r *result) shed() bool { return r.status == 503 || r.status == 429 }

// goodput returns the requests served per simulated second over [from, to).
func (o *outcome) goodputIn(from, to time.Duration) float64 {
	n := 0
	for i := range o.results {
		r := &o.results[i]
		if done := r.at + r.lat; r.served() && done >= from && done < to {
			n++
		}
	}
	return float64(n) / (to - from).Seconds()
}

func (o *outcome) goodput() float64 { return o.goodputIn(0, o.sc.duration) }

// p99In returns the p99 latency of the requests served that were answered
// in [from, to); -1 with none.
func (o *outcome) p99In(from, to time.Duration) time.Duration {
	var lats []time.Duration
	for i := range o.results {
		r := &o.results[i]
		if done := r.at + r.lat; r.served() && done >= from && done < to {
			lats = append(lats, r.lat)
		}
	}
	if len(lats) == 0 {
		return -1
	}
	slices.Sort(lats)
	return lats[(len(lats)*99)/100]
}

func (o *outcome) p99() time.Duration { return o.p99In(0, o.sc.duration+o.m.deadline) }

func (o *outcome) shedShare() float64 {
	n := 0
	for i := range o.results {
		if o.results[i].shed() {
			n++
		}
	}
	return float64(n) / float64(max(len(o.results), 1))
}

// criticalServed returns the share of critical requests served.
func (o *outcome) criticalServed() float64 {
	n, s := 0, 0
	for i := range o.results {
		if r := &o.results[i]; r.critical {
			n++
			if r.served() {
				s++
			}
		}
	}
	return float64(s) / float64(max(n, 1))
}

// meanLimit returns the mean limit over [from, to); -1 without a limit.
func (o *outcome) meanLimit(from, to time.Duration) float64 {
	sum, n := 0.0, 0
	for _, s := range o.samples {
		if s.at >= from && s.at < to {
			if s.limit < 0 {
				return -1
			}
			sum += s.limit
			n++
		}
	}
	return sum / float64(max(n, 1))
}

// settleAfter returns how long after from the run settles until to: the
// first time after which every second of simulated time has a p99 of
// served requests within 2 × unloaded and a goodput of at least 90% of
// the capacity of the moment; -1 if it never does.
func (o *outcome) settleAfter(from, to time.Duration, capacity float64, unloaded time.Duration) time.Duration {
	const step = time.Second
	at := time.Duration(-1)
	for t := from; t+step <= to; t += step {
		p := o.p99In(t, t+step)
		ok := p >= 0 && p <= 2*unloaded && o.goodputIn(t, t+step) >= 0.9*capacity
		switch {
		case ok && at < 0:
			at = t
		case !ok:
			at = -1
		}
	}
	if at < 0 {
		return -1
	}
	return at - from
}

// reached returns how long after from the limit first satisfies ok,
// before to; -1 if it never does, or there is no limit.
func (o *outcome) reached(from, to time.Duration, ok func(float64) bool) time.Duration {
	for _, s := range o.samples {
		if s.at >= from && s.at < to && s.limit >= 0 && ok(s.limit) {
			return s.at - from
		}
	}
	return -1
}
