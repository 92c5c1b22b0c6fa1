package adaptive_test

import (
	"container/heap"
	"math"
	"math/rand/v2"
	"time"

	"github.com/tollgate/tollgate/adaptive"
)

// virtualClock is a core.Clock that reads the simulation's time. The
// simulation runs on one goroutine: no lock.
type virtualClock struct {
	now time.Time
}

func newClock() *virtualClock { return &virtualClock{now: time.Unix(1_700_000_000, 0)} }

func (c *virtualClock) Now() time.Time { return c.now }

func (c *virtualClock) set(t time.Time) { c.now = t }

// server is a discrete-event model of a service on a virtual clock: slots
// requests are served at once, each for a log-normal service time of
// median Median (σ 0.52, so the mean is 1.146 × the median and the p99
// 3.4 ×), the rest wait in a FIFO queue. Arrivals are Poisson at Rate per
// second, Critical with probability CriticalShare, and a request whose
// client gives up (GiveUp after it arrived, for a share GiveUpShare of
// them) leaves the queue or the slot it holds. Everything is seeded: a
// run is a deterministic trace.
type server struct {
	Slots         func(t time.Duration) int     // slots at time t since the start
	Rate          func(t time.Duration) float64 // arrivals per second at t
	Median        time.Duration
	CriticalShare float64 // of arrivals; the rest are Sheddable. Default 1 when Priorities is false.
	Priorities    bool
	GiveUp        time.Duration
	GiveUpShare   float64
	Seed          uint64
	From          time.Duration // counts and samples start with the arrivals at From

	// Filled by run:
	arrived, shed, served, dropped [2]int // by priority
	samples                        []time.Duration
	trace                          []point // every 100 ms
}

type point struct {
	at          time.Duration
	limit       int64
	inflight    int64
	baseline    time.Duration
	servedSince int
}

type simReq struct {
	id       int
	p        adaptive.Priority
	t        adaptive.Ticket
	arrived  time.Duration
	done     bool // completed or given up
	inSlot   bool
	giveUpAt time.Duration // 0: never
}

type event struct {
	at   time.Duration
	kind int // 0 arrival, 1 completion, 2 give up, 3 trace
	r    *simReq
}

type events []event

func (e events) Len() int { return len(e) }
func (e events) Less(i, j int) bool {
	if e[i].at != e[j].at {
		return e[i].at < e[j].at
	}
	return e[i].kind < e[j].kind
}
func (e events) Swap(i, j int) { e[i], e[j] = e[j], e[i] }
func (e *events) Push(x any)   { *e = append(*e, x.(event)) }
func (e *events) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}

// run drives lim (nil: no limit) through the model for d of virtual time.
func (s *server) run(lim *adaptive.Limiter, clock *virtualClock, d time.Duration) {
	rng := rand.New(rand.NewPCG(s.Seed, 22))
	epoch := clock.Now()
	var q events
	var queue []*simReq
	busy := 0
	servedSince := 0
	push := func(e event) { heap.Push(&q, e) }
	nextArrival := func(now time.Duration) time.Duration {
		rate := s.Rate(now)
		return now + time.Duration(rng.ExpFloat64()/rate*float64(time.Second))
	}
	service := func() time.Duration {
		return time.Duration(float64(s.Median) * math.Exp(0.52*rng.NormFloat64()))
	}
	start := func(r *simReq, now time.Duration) {
		busy++
		r.inSlot = true
		push(event{at: now + service(), kind: 1, r: r})
	}
	fill := func(now time.Duration) {
		for len(queue) > 0 && busy < s.Slots(now) {
			r := queue[0]
			queue = queue[1:]
			if !r.done {
				start(r, now)
			}
		}
	}
	end := func(r *simReq, now time.Duration, o adaptive.Outcome) {
		r.done = true
		if lim != nil {
			lim.Release(r.t, o)
		}
	}
	push(event{at: nextArrival(0), kind: 0})
	push(event{at: 0, kind: 3})
	id := 0
	for q.Len() > 0 {
		e := heap.Pop(&q).(event)
		if e.at > d {
			break
		}
		clock.set(epoch.Add(e.at))
		switch e.kind {
		case 0:
			push(event{at: nextArrival(e.at), kind: 0})
			id++
			r := &simReq{id: id, arrived: e.at}
			if s.Priorities && rng.Float64() >= s.CriticalShare {
				r.p = adaptive.Sheddable
			}
			if e.at >= s.From {
				s.arrived[r.p]++
			}
			if lim != nil {
				t, ok := lim.Acquire(r.p)
				if !ok {
					if e.at >= s.From {
						s.shed[r.p]++
					}
					continue
				}
				r.t = t
			}
			if s.GiveUpShare > 0 && rng.Float64() < s.GiveUpShare {
				r.giveUpAt = e.at + s.GiveUp
				push(event{at: r.giveUpAt, kind: 2, r: r})
			}
			queue = append(queue, r)
			fill(e.at)
		case 1:
			r := e.r
			if !r.inSlot { // its client gave up, and the slot was freed then
				continue
			}
			r.inSlot = false
			busy--
			if !r.done {
				servedSince++
				if r.arrived >= s.From {
					s.served[r.p]++
					s.samples = append(s.samples, e.at-r.arrived)
				}
				end(r, e.at, adaptive.Served)
			}
			fill(e.at)
		case 2:
			r := e.r
			if r.done {
				continue
			}
			if r.arrived >= s.From {
				s.dropped[r.p]++
			}
			end(r, e.at, adaptive.Dropped)
			if r.inSlot { // the handler stops: the slot frees now
				busy--
				r.inSlot = false
				fill(e.at)
			}
		case 3:
			p := point{at: e.at, servedSince: servedSince}
			servedSince = 0
			if lim != nil {
				st := lim.Stats()
				p.limit, p.inflight, p.baseline = st.Limit, st.InFlight, st.Baseline
			}
			s.trace = append(s.trace, p)
			push(event{at: e.at + 100*time.Millisecond, kind: 3})
		}
	}
}

// limitAfter returns the mean limit of the trace points in [from, to).
func (s *server) meanLimit(from, to time.Duration) float64 {
	sum, n := 0.0, 0
	for _, p := range s.trace {
		if p.at >= from && p.at < to {
			sum += float64(p.limit)
			n++
		}
	}
	return sum / float64(max(n, 1))
}

// reached returns the first time in [from, to) at which ok holds of the
// limit; -1 if it never does.
func (s *server) reached(from, to time.Duration, ok func(limit float64) bool) time.Duration {
	for _, p := range s.trace {
		if p.at >= from && p.at < to && ok(float64(p.limit)) {
			return p.at
		}
	}
	return -1
}

func constant[T any](v T) func(time.Duration) T { return func(time.Duration) T { return v } }
