-- recover.lua: whether an operation a caller sent itself, and whose reply
-- it lost, changed usage: it did when it left its receipt in the key (see
-- RECEIPTS in apply.lua.tmpl). Asked once the operation's deadline has
-- passed, the answer is final: the operation cannot run any more.
--
-- KEYS[1]  the key's states and receipts (apply.lua.tmpl's KEYS[1])
-- ARGV[1]  the operation's lane (apply.lua.tmpl's ARGV[1], its lane)
-- ARGV[2]  the operation's number on its lane (apply.lua.tmpl's ARGV[1], its number)
-- ARGV[3]  the operation's deadline, the server's TIME in µs (apply.lua.tmpl's ARGV[1], its deadline)
--
-- Reply: the server's TIME in µs as a little-endian double, then 'E' when
-- the deadline has not passed yet (ask again), '1' when the key holds the
-- receipt, '0' when it does not.

local clock = redis.call('TIME')
local srv = clock[1] * 1000000 + clock[2]
local head = struct.pack('<d', srv)
if srv <= tonumber(ARGV[3]) then return head .. 'E' end

local lane, seq = tonumber(ARGV[1]), tonumber(ARGV[2])
local v = redis.call('GET', KEYS[1])
if v and #v % 32 == 0 then
	-- Receipts are the records of ident 0 at the end of the value; an
	-- expired one still proves its operation ran.
	for pos = #v - 31, 1, -32 do
		local h, l, a, b = struct.unpack('<I4I4dd', v, pos)
		if h ~= 0 or l ~= 0 then break end
		if a == lane and b == seq then return head .. '1' end
	end
end
return head .. '0'
