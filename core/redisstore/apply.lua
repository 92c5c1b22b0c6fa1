-- apply.lua: one engine.Op (Take, Peek, Charge, Refund, Reset or Release)
-- over all the limits of one key, atomically. A port of engine.Step: same states, same
-- integer arithmetic (every value is below 2^53, where doubles are exact;
-- divisions go through fdiv, which corrects math.floor's rounding).
--
-- KEYS[1]  the key's states: a string of 32-byte records, one per limit layout
--          (engine.Limit.Ident) the key has state for, at most 16, those of the
--          last operation first: struct '<I4I4ddd' = (ident high 32 bits,
--          ident low 32 bits, A, B, C) (engine.State)
-- KEYS[2]  the operation's record, when ARGV[4] > 0: the reply of an
--          operation already applied, so a retried command is not charged twice
-- KEYS[k]  next (from k = 2, or 3 with a record), the logs of the op's
--          SlidingLog, BucketedWindow and Concurrency limits (engine.State.Log),
--          one per such limit in the order of the limits: lists of struct '<dd'
--          = (timestamp µs, bucket number or lease µs, cost units), oldest
--          first. A log
--          belongs to its limit's record: its key names the ident and the rank
--          of the limit among the op's limits of that ident, which is the
--          record's rank among the records of that ident.
--
-- ARGV[1]  now, Unix µs; empty for the server's TIME
-- ARGV[2]  kind: 0 take, 1 peek, 2 charge, 3 refund, 4 reset, 5 release
--          (engine.Kind)
-- ARGV[3]  cost, units (≥ 0); for a release, the lease to end (> 0)
-- ARGV[4]  TTL of the operation's record (KEYS[2]), ms; 0: no record
-- ARGV[5]  deadline, the server's TIME in µs past which the caller has given
--          up: the script then changes nothing and replies EXPIRED; 0: none
-- ARGV[6]  the parameters, little-endian doubles: TTL margin (ms, added to
--          every key's time to full replenishment), engine.DebtFactor, n (the
--          number of limits), then 9 per limit (engine.Limit): algorithm
--          (engine.Algorithm), quota (units), capacity (units), tick (µs),
--          period (ticks), precision (µs, 0 but for BucketedWindow), buckets
--          (0 but for BucketedWindow), ident high 32 bits, ident low 32 bits.
--          They are the same for every call of a Limiter, so the client
--          formats them once, and one struct.unpack reads a limit's. A
--          specialized copy of this script (fastpath.go) holds them in its
--          text and is run without ARGV[6].
--
-- Times until an instant are computed as (start·tick − now) + span·tick, not
-- (start + span)·tick − now: each term is then below 2^53 even where the sum
-- of now and the span is not.
--
-- Reply: the server's TIME in µs as a little-endian double (from which the
-- client learns the offset of the server's clock, for deadlines), then:
-- 'X' when the deadline had passed (EXPIRED: nothing was done); from the
-- fast path, FASTREPLY (below); else a string of 5
-- little-endian doubles per limit, in order: allowed
-- (1 or 0); when allowed the queueing delay µs (LeakyBucket; else 0), when
-- denied the time µs until the cost could pass, -1 for never; units
-- remaining after the operation; µs until fully replenished; the effective
-- window, µs (window, below); then, when some limit is a Concurrency limit,
-- one more double: the lease an allowed Take of cost > 0 acquired, else 0.
-- (One string: cheaper to build here and to read in the client than an
-- array.)

local floor, min, max = math.floor, math.min, math.max
local pack, unpack = struct.pack, struct.unpack

-- Algorithms (engine.Algorithm) and kinds (engine.Kind).
local SLIDING, FIXED, LOG, BUCKETED, TOKEN, GCRA, LEAKY, CONC = 0, 1, 2, 3, 4, 5, 6, 7
local TAKE, PEEK, CHARGE, REFUND, RESET, RELEASE = 0, 1, 2, 3, 4, 5

-- ⌊a/b⌋ for b > 0. a/b is correctly rounded, so its floor is off by at most
-- one; the exact products below (each under 2^53) correct it.
local function fdiv(a, b)
	local q = floor(a / b)
	if q * b > a then
		q = q - 1
	elseif (q + 1) * b <= a then
		q = q + 1
	end
	return q
end

local function cdiv(a, b) return -fdiv(-a, b) end


local clock = redis.call('TIME') -- Redis ≥ 5 replicates a script's effects, not the script
local srv = clock[1] * 1000000 + clock[2] -- the strings are converted as by tonumber
local now = srv
if ARGV[1] ~= '' then now = tonumber(ARGV[1]) end
local kind = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local opttl = tonumber(ARGV[4])
local head = pack('<d', srv) -- every reply starts with the server's time

-- A caller that gave up (its deadline passed while the command waited,
-- say in a stalled server's socket) was answered without this operation:
-- it must change nothing. With records, an earlier copy of the command may
-- have run; its reply says so.
local deadline = tonumber(ARGV[5])
if deadline > 0 and srv > deadline then
	if opttl > 0 then
		local r = redis.call('GET', KEYS[2])
		if r then return r end
	end
	return head .. 'X'
end

-- Operation records (KEYS[2], when opttl > 0). A retried operation that
-- already went through returns its first reply, and changes nothing. The
-- record is looked up before the first write: at the start when the op has a
-- log (which is written as the decision is made), else once the decision is
-- known, by claim.

-- claim runs before anything is written: a state-changing operation stores
-- its reply under its id unless one is there already (SET NX, one call), and
-- any other looks for one; a reply found is that of an earlier run of the
-- same command, which the caller returns instead of writing anything.
-- (Functions are made only where they are used: each costs a closure per
-- call of the script.)
local claim
if opttl > 0 then
	claim = function(write, reply)
		if write then
			if redis.call('SET', KEYS[2], reply, 'PX', opttl, 'NX') then return nil end
		end
		return redis.call('GET', KEYS[2]) or nil
	end
end

local blob = redis.call('GET', KEYS[1])

-- The fast path: a Take or a Peek, every limit of an algorithm without a
-- log, and the key's state exactly the op's records in order (or none), as
-- every call of one Limiter leaves it. The script then only decides and
-- writes: its reply is the time it used, its verdict and the records it
-- found (FASTREPLY), from which the client computes the Decision with
-- engine.Step, the function this script ports, and checks the verdict
-- against this one's. The same steps as the general path (fresh, roll,
-- need, add), on locals: the first loop checks every limit, the second
-- changes each when all admit. With one limit the second loop finds the
-- first's locals as they were left; with more, the first loop saves them
-- in st (W slots a limit). No function is made here: a closure costs an
-- allocation per upvalue on every call.
--
-- FASTREPLY: now (Unix µs, a little-endian double), '1' when the op was
-- allowed or '0', then the key's records as read (none for a fresh key): 9
-- bytes and a multiple of 32 after the head, where a general reply is a
-- multiple of 32.
--
-- The store runs this script for limits of any layout; for a layout it
-- meets often it runs a copy in which the block between the markers below
-- is replaced by the same steps specialized to that layout's numbers
-- (fastpath.go): no parameters to unpack, no branch on the algorithm.
--
-- The fast path leaves its results in fast (true when it applied), all (its
-- verdict), keep (µs until every limit is fully replenished), recs (the
-- records to store) and fmargin (the TTL margin, ms); the code after the
-- markers replies and writes.
local fast, all, keep, recs, fmargin = false, false, 0, '', 0
-- FAST BEGIN
local P = ARGV[6]
local margin, debtf, n = unpack('<ddd', P)
if kind <= PEEK and (not blob or #blob == 32 * n) then
	local W = 12
	local st
	if n > 1 then -- sized in the constructor for three limits: no regrowth
		st = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }
	end
	fast, all = true, true
	local alg, q, cap, tick, pt, idh, idl, A, B, C, tt, e, _
	for i = 1, n do
		alg, q, cap, tick, pt, _, _, idh, idl = unpack('<ddddddddd', P, 72 * i - 47)
		if alg == 2 or alg == 3 or alg == 7 then -- LOG, BUCKETED, CONC
			fast = false
			break
		end
		if blob then
			local h, l
			h, l, A, B, C = unpack('<I4I4ddd', blob, 32 * i - 31)
			if h ~= idh or l ~= idl then
				fast = false
				break
			end
		end
		tt = now
		if tick ~= 1 then tt = fdiv(now, tick) end
		-- e: SlidingWindow's ticks into the window; GCRA's, LeakyBucket's debt
		-- less Q.
		e = 0
		local ok = cost <= cap
		if alg == 1 then -- FIXED: fresh, roll, need
			local p = pt * tick
			if not blob then A, B, C = fdiv(now, p), 0, 0 end
			if now >= (A + 1) * p then A, B = fdiv(now, p), 0 end
			ok = ok and B + cost <= q
		elseif alg == 0 then -- SLIDING
			if not blob then A, B, C = fdiv(tt, pt), 0, 0 end
			local start = A * pt
			if tt < start then
				e = 0
			elseif tt < start + pt then
				e = tt - start
			elseif tt < start + 2 * pt then
				A, B, C = A + 1, C, 0
				e = tt - start - pt
			else
				A, B, C = fdiv(tt, pt), 0, 0
				e = tt - A * pt
			end
			ok = ok and B * (pt - e) + C * pt + cost * pt <= q * pt
		elseif alg == 4 then -- TOKEN
			local full = cap * pt
			if not blob then A, B, C = full, tt, 0 end
			A = min(A, full)
			if tt > B then
				-- The first tick's refill first, so that full − A stays within
				-- 2^53 (see the general path's roll). A product past 2^53 is
				-- rounded, but then it is past full − A too.
				A = A + q
				local x = (tt - B - 1) * q
				if x >= full - A then A = full else A = A + x end
				B = tt
			end
			ok = ok and A >= cost * pt
		else -- GCRA, LEAKY
			if not blob then A, B, C = tt, 0, 0 end
			if B >= q then B = q - 1 end
			if A < tt then A, B = tt, 0 end
			-- e: the debt Q·(TAT − t) less Q, capped at the most a charge
			-- leaves (m·P + rc, rc the refill since tick tt) less Q: gdebt
			-- in the general path. At the cap a charge changes nothing,
			-- whether the true debt is at it or past it.
			local rc = 0
			if tick ~= 1 then
				local r, qh = now - tt * tick, fdiv(q, tick)
				rc = r * qh + cdiv(r * (q - qh * tick), tick)
			end
			local lim = debtf * cap * pt + (rc - q)
			local dt = A - tt - 1
			if dt < 0 then
				e = B - q
				if e > lim then e = lim end
			elseif dt > fdiv(lim, q) then
				e = lim
			else
				local x = dt * q
				if B > lim - x then e = lim else e = x + B end
			end
			ok = ok and e + (cost - cap) * pt <= -q
		end
		all = all and ok
		if st then
			local j = W * (i - 1)
			st[j + 1], st[j + 2], st[j + 3], st[j + 4], st[j + 5], st[j + 6] = alg, q, cap, tick, pt, idh
			st[j + 7], st[j + 8], st[j + 9], st[j + 10], st[j + 11], st[j + 12] = idl, A, B, C, tt, e
		end
	end
	if fast then
		local write = all and kind == TAKE
		fmargin = margin
		for i = 1, n do
			if st then
				local j = W * (i - 1)
				alg, q, cap, tick, pt, idh = st[j + 1], st[j + 2], st[j + 3], st[j + 4], st[j + 5], st[j + 6]
				idl, A, B, C, tt, e = st[j + 7], st[j + 8], st[j + 9], st[j + 10], st[j + 11], st[j + 12]
			end
			local m = debtf * cap
			local d = 0
			if write then d = min(cost, m) end
			local reset = 0 -- add, then the time until fully replenished (core's report)
			if alg == 1 then -- FIXED
				if d ~= 0 then B = min(B + d, m) end
				if B ~= 0 then reset = (A + 1) * (pt * tick) - now end
			elseif alg == 0 then -- SLIDING
				if d ~= 0 then C = min(C + d, m) end
				if C > 0 then
					reset = (A + 2) * (pt * tick) - now
				elseif B > 0 then
					reset = (A + 1) * (pt * tick) - now
				end
			else -- TOKEN, GCRA, LEAKY: rc as in the first loop
				local rc = 0
				if tick ~= 1 and d ~= 0 then
					local r, qh = now - tt * tick, fdiv(q, tick)
					rc = r * qh + cdiv(r * (q - qh * tick), tick)
				end
				if alg == 4 then -- TOKEN
					local full = cap * pt
					if d ~= 0 then A = max(min(A, full - rc) - d * pt, (full - m * pt) - rc) end
					if A < full then reset = B * tick - now + (cdiv(full - (A + q), q) + 1) * tick end
				else -- GCRA, LEAKY
					local lim = m * pt + (rc - q)
					if d ~= 0 and e < lim then
						e = min(max(e, rc - q) + d * pt, lim)
						local k = fdiv(e, q)
						A, B = tt + 1 + k, e - k * q
					end
					if e > -q then reset = (tt + 1) * tick - now + cdiv(e, q) * tick end
				end
			end
			if reset > keep then keep = reset end
			local rec = pack('<I4I4ddd', idh, idl, A, B, C)
			if i == 1 then recs = rec else recs = recs .. rec end
		end
	end
end
-- FAST END
if fast then
	local write = all and kind == TAKE
	local reply = head .. pack('<d', now) .. (all and '1' or '0') .. (blob or '')
	if opttl > 0 then
		local r = claim(write, reply)
		if r then return r end
	end
	if keep == 0 then
		if blob then redis.call('DEL', KEYS[1]) end
	elseif write or recs ~= blob then
		redis.call('SET', KEYS[1], recs, 'PX', cdiv(keep, 1000) + fmargin)
	end
	return reply
end

-- The general path. Its parameters: ARGV[6], or in a specialized script
-- (fastpath.go) the same string written in the script, which is then run
-- without ARGV[6].
local P = ARGV[6] -- PARAMS
local margin, debtf, n = unpack('<ddd', P)

local RECORD = '<I4I4ddd'
local OUT = '<ddddd'

-- limit returns the parameters of limit i: alg, q, cap, tick, pt, prec, nb,
-- idh, idl.
local LIMIT = '<ddddddddd'
local function limit(i) return unpack(LIMIT, P, 25 + 72 * (i - 1)) end

-- packout returns the reply for out, a table of 5 numbers per limit.
local function packout(out)
	if n == 1 then return pack(OUT, out[1], out[2], out[3], out[4], out[5]) end
	local parts = {}
	for i = 1, n do
		local j = 5 * (i - 1)
		parts[i] = pack(OUT, out[j + 1], out[j + 2], out[j + 3], out[j + 4], out[j + 5])
	end
	return table.concat(parts)
end

-- One table per limit: its parameters (engine.Limit), its state (engine.State:
-- A, B, C), the call's position (tt: now in ticks, rounded down; e:
-- SlidingWindow ticks into the window; rc: the rated algorithms' refill
-- since tick tt, rounded up, as core's shape.since) and, for logs, the view
-- of the stored list: its key, length, entries dropped from its head since
-- it was read, entries read (by index in the stored list, from 0) and
-- whether it is stale (belongs to a discarded state). Functions take the
-- table: no upvalues to capture.
local L, haslog, hasconc = {}, false, false
local k = 1 -- KEYS index of the last log so far
if opttl > 0 then k = 2 end
for i = 1, n do
	local alg, q, cap, tick, pt, prec, nb, idh, idl = limit(i)
	local log = alg == LOG or alg == BUCKETED or alg == CONC
	if log then k = k + 1 end
	haslog = haslog or log
	hasconc = hasconc or alg == CONC
	-- Every field in the constructor: one allocation.
	L[i] = {
		alg = alg, q = q, cap = cap, tick = tick, pt = pt,
		p = pt * tick, m = debtf * cap, -- m is core's debtCap
		prec = prec, nb = nb, idh = idh, idl = idl,
		A = false, B = 0, C = 0, tt = 0, e = 0, rc = 0, ok = false, wait = 0,
		key = log and KEYS[k], len = 0, head = 0, cache = log and {}, stale = log,
	}
end

-- lease: the lease a Take acquires on the Concurrency limits (engine's
-- leaseOf), set once every limit is checked.
local lease = 0

local function fmod(a, b) return a - b * fdiv(a, b) end

local function ticks(s, t)
	if s.tick == 1 then return t end
	return fdiv(t, s.tick)
end

-- Logs, read lazily in chunks. A mark is {timestamp µs or bucket, units}.

local MARK = '<dd'

local function lget(s, j)
	local c = s.cache
	local m = c[j]
	if m == nil then
		local items = redis.call('LRANGE', s.key, j, j + 63)
		for k = 1, #items do
			local at, v = unpack(MARK, items[k])
			c[j + k - 1] = { at, v }
		end
		m = c[j]
	end
	return m
end

local function expiry(s, m)
	if s.alg == BUCKETED then return (m[1] + s.nb) * s.prec end
	return m[1] + s.p
end

-- lcommit writes what the view dropped (a stale list, expired head
-- entries) before the log is changed.
local function lcommit(s)
	if s.stale then
		redis.call('DEL', s.key)
		s.stale = false
	elseif s.head > 0 then
		if s.head == s.len then
			redis.call('DEL', s.key)
		else
			redis.call('LTRIM', s.key, s.head, -1)
		end
		s.len, s.head, s.cache = s.len - s.head, 0, {}
	end
end

local function lset(s, j, at, v)
	redis.call('LSET', s.key, j, pack(MARK, at, v))
	s.cache[j] = { at, v }
end

-- release removes the mark of lease l from a Concurrency log, if it is
-- there (engine's release). Redis lists have no removal by index: the mark
-- is overwritten with a tombstone, which LREM then removes. Runs after
-- lcommit: the view is the whole list.
local function release(s, l)
	for j = 0, s.len - 1 do
		local m = lget(s, j)
		if m[1] == l then
			s.A = s.A - m[2]
			redis.call('LSET', s.key, j, 'R')
			redis.call('LREM', s.key, 1, 'R')
			s.len, s.cache = s.len - 1, {}
			return
		end
		if m[1] > l then return end
	end
end

-- Load the states: one 32-byte record per limit layout (ident) the key has
-- state for, those of the last operation first, as memstore keeps them.
-- Each limit takes the first record of its ident not taken by an earlier
-- one; a limit without one starts fresh.

if opttl > 0 and haslog then
	local rec = redis.call('GET', KEYS[2])
	if rec then return rec end
end

local old, nold = {}, 0 -- stored records: position in blob, or false once taken
if blob and #blob % 32 == 0 then
	for pos = 1, #blob, 32 do
		nold = nold + 1
		old[nold] = pos
	end
end
for i = 1, n do
	local s = L[i]
	for j = 1, nold do
		if old[j] then
			local h, l, a, b, c = unpack(RECORD, blob, old[j])
			if h == s.idh and l == s.idl then
				s.A, s.B, s.C = a, b, c
				old[j] = false
				if s.key then
					s.stale = false
					s.len = redis.call('LLEN', s.key)
					if s.len == 0 then s.A = 0 end -- the list expired with its marks
				end
				break
			end
		end
	end
end

-- The algorithms (core's state.go and one file per algorithm).

local function fresh(s)
	local alg = s.alg
	local lease = s.B -- a Concurrency limit's newest lease survives (engine's fresh)
	s.A, s.B, s.C = 0, 0, 0
	if alg == FIXED then
		s.A = fdiv(now, s.p)
	elseif alg == SLIDING then
		s.A = fdiv(ticks(s, now), s.pt)
	elseif alg == TOKEN then
		s.A = s.cap * s.pt
		s.B = ticks(s, now)
	elseif alg == GCRA or alg == LEAKY then
		s.A = ticks(s, now)
	else
		if alg == CONC then s.B = lease end
		if not s.stale and s.len > 0 then s.stale = true end
		s.len, s.head, s.cache = 0, 0, {}
	end
end

local function roll(s)
	local alg = s.alg
	local tt = ticks(s, now)
	s.tt = tt
	if s.tick ~= 1 and alg >= TOKEN then
		local q, tick = s.q, s.tick
		local r, qh = now - tt * tick, fdiv(q, tick)
		s.rc = r * qh + cdiv(r * (q - qh * tick), tick)
	end
	if alg == FIXED then
		if now >= (s.A + 1) * s.p then
			s.A, s.B = fdiv(now, s.p), 0
		end
	elseif alg == SLIDING then
		local pt = s.pt
		local start = s.A * pt
		if tt < start then
			s.e = 0
		elseif tt < start + pt then
			s.e = tt - start
		elseif tt < start + 2 * pt then
			s.A, s.B, s.C = s.A + 1, s.C, 0
			s.e = tt - start - pt
		else
			s.A, s.B, s.C = fdiv(tt, pt), 0, 0
			s.e = tt - s.A * pt
		end
	elseif alg == LOG or alg == BUCKETED or alg == CONC then
		while s.head < s.len do
			local m = lget(s, s.head)
			if expiry(s, m) > now then break end
			s.A = s.A - m[2]
			s.head = s.head + 1
		end
	elseif alg == TOKEN then
		local full = s.cap * s.pt
		s.A = min(s.A, full)
		if tt > s.B then
			-- The first tick's refill first: a charge on a coarse tick may
			-- leave A up to rc ≤ Q below full − m·P, where full − A can pass
			-- 2^53; full − (A + Q) cannot. A product past 2^53 is rounded,
			-- but then it is past full − A too.
			s.A = s.A + s.q
			local x = (tt - s.B - 1) * s.q
			if x >= full - s.A then s.A = full else s.A = s.A + x end
			s.B = tt
		end
	else
		if s.B >= s.q then s.B = s.q - 1 end
		if s.A < tt then s.A, s.B = tt, 0 end
	end
end

-- gdebt returns core's gcraDebt less Q (one tick's refill): Q·(TAT − t −
-- 1 tick) for t = tt, capped at the most a charge leaves (m·P + rc) less Q,
-- and whether the true debt is above that cap (a clock behind the one that
-- wrote the state). Less Q, because the cap can pass 2^53 by rc ≤ Q; the
-- debt less Q is at least −Q, as TAT ≥ tt after roll. The tests are exact:
-- the products they avoid could round to the cap.
local function gdebt(s)
	local q = s.q
	local limit = s.m * s.pt + (s.rc - q)
	local dt = s.A - s.tt - 1
	if dt < 0 then
		local x = s.B - q
		if x > limit then return limit, true end
		return x, false
	end
	if dt > fdiv(limit, q) then return limit, true end
	local x = dt * q
	if s.B > limit - x then return limit, true end
	return x + s.B, false
end

-- need reports whether cost c can pass now: ok, then the time until it can
-- (µs, -1 for never) or LeakyBucket's delay.
local function need(s, c)
	if c > s.cap then return false, -1 end
	local alg = s.alg
	if alg == FIXED then
		if s.B + c <= s.q then return true, 0 end
		return false, (s.A + 1) * s.p - now
	elseif alg == SLIDING then
		local pt, q, w, b, cur = s.pt, s.q, s.A, s.B, s.C
		if b * (pt - s.e) + cur * pt + c * pt <= q * pt then return true, 0 end
		local at
		local r = q - cur - c
		if r >= 0 and b > 0 and pt - fdiv(r * pt, b) < pt then
			at = w * pt + pt - fdiv(r * pt, b)
		else
			local e2 = 0
			if cur > 0 then e2 = max(pt - fdiv((q - c) * pt, cur), 0) end
			at = (w + 1) * pt + e2
		end
		return false, at * s.tick - now
	elseif alg == LOG or alg == BUCKETED or alg == CONC then
		local excess = (s.A - s.q) + c -- A + c may pass 2^53; this may not
		if excess <= 0 then return true, 0 end
		for j = s.head, s.len - 1 do
			local m = lget(s, j)
			excess = excess - m[2]
			if excess <= 0 then return false, expiry(s, m) - now end
		end
		return false, -1
	elseif alg == TOKEN then
		if s.A >= c * s.pt then return true, 0 end
		-- ⌈(c·P − A)/Q⌉ ticks, as 1 + ⌈(c·P − (A + Q))/Q⌉: below 2^53.
		return false, s.B * s.tick - now + (cdiv(c * s.pt - (s.A + s.q), s.q) + 1) * s.tick
	end
	-- GCRA, LEAKY, with the debt and the excess less Q (gdebt).
	local start, debt = (s.tt + 1) * s.tick - now, gdebt(s)
	local excess = debt + (c - s.cap) * s.pt
	if excess > -s.q then
		return false, start + cdiv(excess, s.q) * s.tick
	end
	if alg == LEAKY and debt > -s.q then
		return true, max(start + cdiv(debt, s.q) * s.tick, 0)
	end
	return true, 0
end

-- add changes usage by d: a charge when d > 0, a refund when d < 0.
local function add(s, d)
	local m, alg = s.m, s.alg
	if d > m then
		d = m
	elseif alg == SLIDING and d < -2 * m then
		d = -2 * m -- its two windows may hold m each
	elseif alg ~= SLIDING and d < -m then
		d = -m
	end
	if d == 0 then return end
	if alg == FIXED then
		s.B = min(max(s.B + d, 0), m)
	elseif alg == SLIDING then
		if d > 0 then
			s.C = min(s.C + d, m)
		else
			local x = min(s.C, -d)
			s.C = s.C - x
			s.B = max(s.B - (-d - x), 0)
		end
	elseif alg == LOG or alg == BUCKETED or alg == CONC then
		local at = now
		if alg == BUCKETED then
			at = fdiv(now, s.prec)
		elseif alg == CONC then -- only a Take adds, at its lease: never merged
			at = lease
			s.B = max(s.B, lease)
		end
		if d > 0 then
			d = min(d, m - s.A)
			if d <= 0 then return end
			s.A = s.A + d
			local len = s.len
			if len > 0 then
				local last = lget(s, len - 1)
				if last[1] >= at then
					lset(s, len - 1, last[1], last[2] + d)
					return
				end
			end
			redis.call('RPUSH', s.key, pack(MARK, at, d))
			s.len = len + 1
			s.cache[len] = { at, d }
			return
		end
		local r = min(-d, s.A)
		s.A = s.A - r
		while r > 0 do
			local j = s.len - 1
			local last = lget(s, j)
			local x = min(last[2], r)
			r = r - x
			if last[2] == x then
				redis.call('RPOP', s.key)
				s.cache[j] = nil
				s.len = j
			else
				lset(s, j, last[1], last[2] - x)
			end
		end
	elseif alg == TOKEN then
		-- A charge counts from now: at most full at now (full − rc at tick
		-- tt), and saturated at m at now (core's tokenAdd).
		local full = s.cap * s.pt
		if d > 0 then
			s.A = max(min(s.A, full - s.rc) - d * s.pt, (full - m * s.pt) - s.rc)
		else
			s.A = min(s.A - d * s.pt, full)
		end
	else
		-- A refund comes off the stored TAT, down to tick tt; a charge pulls
		-- TAT up to now (a debt of rc at tt), saturates at m·T past now and
		-- never moves TAT back (core's gcraAdd; debts less Q, as gdebt's).
		local q = s.q
		if d < 0 then
			local num = s.B + d * s.pt
			s.A, s.B = s.A + fdiv(num, q), fmod(num, q)
			if s.A < s.tt then s.A, s.B = s.tt, 0 end
			return
		end
		local debt, over = gdebt(s)
		if over then return end
		debt = min(max(debt, s.rc - q) + d * s.pt, m * s.pt + (s.rc - q))
		s.A, s.B = s.tt + 1 + fdiv(debt, q), fmod(debt, q)
	end
end

-- report returns the units left and the µs until fully replenished.
local function report(s)
	local alg, q = s.alg, s.q
	if alg == FIXED then
		if s.B == 0 then return q, 0 end
		return max(q - s.B, 0), (s.A + 1) * s.p - now
	elseif alg == SLIDING then
		local pt, w = s.pt, s.A
		local rem = q - s.C
		if s.B > 0 then rem = rem - cdiv(s.B * (pt - s.e), pt) end
		rem = max(rem, 0)
		if s.C > 0 then return rem, (w + 2) * pt * s.tick - now end
		if s.B > 0 then return rem, (w + 1) * pt * s.tick - now end
		return rem, 0
	elseif alg == LOG or alg == BUCKETED or alg == CONC then
		if s.len == s.head then return q, 0 end
		return max(q - s.A, 0), expiry(s, lget(s, s.len - 1)) - now
	elseif alg == TOKEN then
		local full = s.cap * s.pt
		local rem = max(fdiv(s.A, s.pt), 0)
		if s.A >= full then return rem, 0 end
		return rem, s.B * s.tick - now + (cdiv(full - (s.A + q), q) + 1) * s.tick
	end
	local debt = gdebt(s) -- less Q
	local rem = max(fdiv((s.cap * s.pt - q) - debt, s.pt), 0)
	if debt <= -q then return rem, 0 end
	return rem, (s.tt + 1) * s.tick - now + cdiv(debt, q) * s.tick
end

-- window returns the effective window of s after the operation, with rem
-- units left: when one more unit would pass had rem been taken now
-- (engine/window.go). A log is not touched: its window is its oldest live
-- mark's expiry (or that of a mark made now); the other states are taken
-- from and put back.
local function window(s, rem)
	local alg = s.alg
	if alg == FIXED then return (s.A + 1) * s.p - now end
	if alg == LOG or alg == BUCKETED or alg == CONC then
		if rem == 0 then
			local _, w = need(s, 1)
			return w
		end
		if s.head < s.len then return expiry(s, lget(s, s.head)) - now end
		local at = now
		if alg == BUCKETED then at = fdiv(now, s.prec) end
		return expiry(s, { at, 0 }) - now
	end
	local A, B, C = s.A, s.B, s.C
	if rem > 0 then add(s, rem) end
	local ok, w = need(s, 1)
	s.A, s.B, s.C = A, B, C
	if ok then return 0 end
	return w
end

-- engine.Step: check every limit, then change each only if all allow (Take),
-- or unconditionally (Charge, Refund, Reset).

local allowed = true
for i = 1, n do
	local s = L[i]
	if not s.A then fresh(s) end
	roll(s)
	if kind == TAKE or kind == PEEK then
		s.ok, s.wait = need(s, cost)
	else
		s.ok, s.wait = true, 0
	end
	allowed = allowed and s.ok
end
if kind == TAKE and allowed and cost > 0 and hasconc then
	lease = now
	for i = 1, n do
		local s = L[i]
		if s.alg == CONC and s.B + 1 > lease then lease = s.B + 1 end
	end
end

local write = kind >= CHARGE or (kind == TAKE and allowed)
local out, keep, recs = {}, 0, {}
for i = 1, n do
	local s = L[i]
	-- Like memstore, keep what fresh and roll changed even when the
	-- operation changes nothing: with a clock that steps back, a state rolled
	-- forward decides differently from the state before the roll.
	local committed = false
	if s.key and (s.stale or s.head > 0) then
		lcommit(s)
		committed = true
	end
	if write then
		local conc = s.alg == CONC -- counts units in flight: no post-hoc cost
		if kind == TAKE or kind == CHARGE and not conc then
			add(s, cost)
		elseif kind == REFUND and not conc then
			add(s, -cost)
		elseif kind == RESET then
			fresh(s)
			if s.key then lcommit(s) end
		elseif kind == RELEASE and conc then
			release(s, cost)
		end
		if kind >= CHARGE then
			s.ok, s.wait = need(s, 0)
			if s.ok then s.wait = 0 end
		end
	end
	local rem, reset = report(s)
	local j = 5 * (i - 1)
	out[j + 1], out[j + 2], out[j + 3], out[j + 4] = s.ok and 1 or 0, s.wait, rem, reset
	out[j + 5] = window(s, rem)
	keep = max(keep, reset)
	if s.alg == CONC then keep = max(keep, s.B + 1 - now) end -- leases are never reused
	recs[i] = pack(RECORD, s.idh, s.idl, s.A, s.B, s.C)
	if s.key and s.len > 0 and (write or committed) then
		redis.call('PEXPIRE', s.key, cdiv(reset, 1000) + margin)
	end
end

local reply = head .. packout(out)
if hasconc then reply = reply .. pack('<d', lease) end
if opttl > 0 and not haslog then
	local r = claim(write, reply)
	if r then return r end
end

-- Store the op's records first, in order, then the other layouts' (at
-- most 16 in all, memstore's bound). The key lives until every state is
-- replenished: the op's, and the others' as their TTL had it.
local others = 0
for j = 1, nold do
	if old[j] and #recs < 16 then
		recs[#recs + 1] = string.sub(blob, old[j], old[j] + 31)
		others = others + 1
	end
end
if others == 0 and keep == 0 then
	if blob then redis.call('DEL', KEYS[1]) end
else
	local rec = table.concat(recs)
	if write or rec ~= blob then
		local ttl = cdiv(keep, 1000) + margin
		if others > 0 then ttl = max(ttl, redis.call('PTTL', KEYS[1])) end
		redis.call('SET', KEYS[1], rec, 'PX', ttl)
	end
end
if write and opttl > 0 and haslog then
	redis.call('SET', KEYS[2], reply, 'PX', opttl)
end
return reply
