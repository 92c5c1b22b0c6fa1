package keyfuncs

import (
	"strings"
	"testing"
)

func TestParseNode(t *testing.T) {
	tests := []struct {
		in   string
		want string // "" for rejected
	}{
		{"192.0.2.1", "192.0.2.1"},
		{"192.0.2.1:80", "192.0.2.1"},
		{"192.0.2.1:0", "192.0.2.1"},
		{"192.0.2.1:65535", "192.0.2.1"},
		{"192.0.2.1:_obf", "192.0.2.1"},
		{"192.0.2.1:_a.b-c_D9", "192.0.2.1"},
		{"2001:db8::1", "2001:db8::1"},
		{"2001:DB8::1", "2001:db8::1"},
		{"fe80::1%eth0", "fe80::1"},
		{"[2001:db8::1]", "2001:db8::1"},
		{"[2001:db8::1]:80", "2001:db8::1"},
		{"[2001:db8::1]:_obf", "2001:db8::1"},
		{"[fe80::1%eth0]:80", "fe80::1"},
		{"::ffff:192.0.2.1", "192.0.2.1"},
		{"[::ffff:192.0.2.1]:80", "192.0.2.1"},
		{"::ffff:c000:201", "192.0.2.1"},
		{"::", "::"},
		{"0.0.0.0", "0.0.0.0"},
		{"", ""},
		{"unknown", ""},
		{"_hidden", ""},
		{"192.0.2.1:", ""},
		{"192.0.2.1:65536", ""},
		{"192.0.2.1:123456", ""},
		{"192.0.2.1:0000080", "192.0.2.1"},
		{"192.0.2.1:+80", ""},
		{"192.0.2.1:-1", ""},
		{"192.0.2.1:_", ""},
		{"192.0.2.1:_a b", ""},
		{"192.0.2.1:80:80", ""},
		{"192.0.2.1%eth0", ""},
		{"192.0.2.01", ""},
		{"192.0.2", ""},
		{"192.0.2.256", ""},
		{" 192.0.2.1", ""},
		{"[192.0.2.1]", ""},
		{"[192.0.2.1]:80", ""},
		{"[2001:db8::1", ""},
		{"2001:db8::1]", ""},
		{"[2001:db8::1]80", ""},
		{"[2001:db8::1]:", ""},
		{"[2001:db8::1]:99999", ""},
		{"[[2001:db8::1]]", ""},
		{"[]", ""},
		{"[]:80", ""},
		{"2001:db8::1:80:90:100:110:120", ""},
		{"example.com", ""},
		{"example.com:80", ""},
		{"1.2.3.4, 5.6.7.8", ""},
	}
	for _, tt := range tests {
		a, ok := parseNode(tt.in)
		got := ""
		if ok {
			got = a.String()
		}
		if got != tt.want {
			t.Errorf("parseNode(%q) = %q, %v; want %q", tt.in, got, ok, tt.want)
		}
	}
}

func TestForwardedFor(t *testing.T) {
	tests := []struct {
		elem string
		want string
		ok   bool
	}{
		{"for=192.0.2.60", "192.0.2.60", true},
		{"FOR=192.0.2.60", "192.0.2.60", true},
		{`for="[2001:db8:cafe::17]:4711"`, "[2001:db8:cafe::17]:4711", true},
		{"for=192.0.2.60;proto=http;by=203.0.113.43", "192.0.2.60", true},
		{"proto=http;for=192.0.2.60", "192.0.2.60", true},
		{"for=192.0.2.60 ; proto=http", "192.0.2.60", true},
		{";;for=192.0.2.60;;", "192.0.2.60", true},
		{`host="a;b,c";for=unknown`, "unknown", true},
		{`host="a\"b";for=x`, "x", true},
		{`host="a\\";for=x`, "x", true},
		{"for=_hidden", "_hidden", true},
		{"proto=http", "", false},
		{"", "", false},
		{"for", "", false},
		{"for=", "", false},
		{`for=""`, "", false},
		{"=x", "", false},
		{"for =x", "", false},
		{"for= x", "", false},
		{"for=x y", "", false},
		{"for=x;for=y", "", false},
		{"for=x;FOR=x", "", false},
		{`for="x`, "", false},
		{`for="x\"`, "", false},
		{`for="x\`, "", false},
		{`for="1.2.3\.4"`, "", false},
		{`for="x"y`, "", false},
		{`for=x\y`, "", false},
		{"for=\"x\x01\"", "", false},
		{"for=\"x\x7f\"", "", false},
		{"f@r=x", "", false},
	}
	for _, tt := range tests {
		got, ok := forwardedFor(tt.elem)
		if got != tt.want || ok != tt.ok {
			t.Errorf("forwardedFor(%q) = %q, %v; want %q, %v", tt.elem, got, ok, tt.want, tt.ok)
		}
	}
}

func TestLastForwardedElement(t *testing.T) {
	long := "for=192.0.2.1;host=" + strings.Repeat("h", maxElementLen-len("for=192.0.2.1;host="))
	tests := []struct {
		name       string
		line       string
		rest, node string
		more, ok   bool
	}{
		{name: "a single element is the whole line", line: "for=192.0.2.1", node: "192.0.2.1", ok: true},
		{name: "the last element is split off", line: "for=a, for=192.0.2.1", rest: "for=a", node: "192.0.2.1", more: true, ok: true},
		{name: "a trailing comma gives an empty element", line: "for=a,", rest: "for=a", more: true, ok: true},
		{name: "a quoted comma does not split", line: `for=a, for=192.0.2.1;host="x,y"`, rest: "for=a", node: "192.0.2.1", more: true, ok: true},
		{name: "an escaped quote stays inside the string", line: `for=a, for=192.0.2.1;host="x\",y"`, rest: "for=a", node: "192.0.2.1", more: true, ok: true},
		{name: "an escaped backslash ends before the quote", line: `for=a, for=192.0.2.1;host="x\\"`, rest: "for=a", node: "192.0.2.1", more: true, ok: true},
		{name: "an unopened quote is unusable", line: `for=a, for=192.0.2.1;host=x"`, ok: false},
		{name: "an element of maxElementLen bytes is read", line: "for=a," + long, rest: "for=a", node: "192.0.2.1", more: true, ok: true},
		{name: "an element of maxElementLen bytes alone is read", line: long, node: "192.0.2.1", ok: true},
		{name: "a longer element is unusable", line: "for=a," + long + "h", ok: false},
		{name: "a longer element alone is unusable", line: long + "h", ok: false},
		{name: "a backslash run reaching the bound is unusable", line: `for=192.0.2.1;host="` + strings.Repeat(`\`, 2*maxElementLen) + `"`, ok: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rest, node, more, ok := lastForwardedElement(tt.line)
			if !tt.ok {
				if ok {
					t.Fatalf("lastForwardedElement(%.40q) = %.40q, %q, %v, true; want not ok", tt.line, rest, node, more)
				}
				return
			}
			if rest != tt.rest || node != tt.node || more != tt.more || !ok {
				t.Fatalf("lastForwardedElement(%.40q) = %.40q, %q, %v, %v; want %.40q, %q, %v, true", tt.line, rest, node, more, ok, tt.rest, tt.node, tt.more)
			}
		})
	}
}

func TestLastXFFElement(t *testing.T) {
	hop := strings.Repeat(" ", maxNodeLen-len("192.0.2.1")) + "192.0.2.1"
	tests := []struct {
		name       string
		line       string
		rest, node string
		more, ok   bool
	}{
		{name: "a single address is the whole line", line: " 192.0.2.1 ", node: "192.0.2.1", ok: true},
		{name: "the last address is split off", line: "a,b, 192.0.2.1", rest: "a,b", node: "192.0.2.1", more: true, ok: true},
		{name: "an element of maxNodeLen bytes is read", line: "a," + hop, rest: "a", node: "192.0.2.1", more: true, ok: true},
		{name: "an element of maxNodeLen bytes alone is read", line: hop, node: "192.0.2.1", ok: true},
		{name: "a longer element is unusable", line: "a, " + hop, ok: false},
		{name: "a longer element alone is unusable", line: " " + hop, ok: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rest, node, more, ok := lastXFFElement(tt.line)
			if !tt.ok {
				if ok {
					t.Fatalf("lastXFFElement(%.40q) = %.40q, %q, %v, true; want not ok", tt.line, rest, node, more)
				}
				return
			}
			if rest != tt.rest || node != tt.node || more != tt.more || !ok {
				t.Fatalf("lastXFFElement(%.40q) = %.40q, %q, %v, %v; want %.40q, %q, %v, true", tt.line, rest, node, more, ok, tt.rest, tt.node, tt.more)
			}
		})
	}
}

// parseIPv4Port is parseNodeText's shortcut for the common RemoteAddr: it
// must accept only what the general parser accepts, with the same result.
func checkIPv4Port(t *testing.T, s string) {
	t.Helper()
	a, host, ok := parseIPv4Port(s)
	if !ok {
		return
	}
	wa, whost, wok := parseNodeGeneral(s)
	if !wok || a != wa || host != whost {
		t.Fatalf("parseIPv4Port(%q) = %v, %q, true; the general parser says %v, %q, %v", s, a, host, wa, whost, wok)
	}
}

func TestParseIPv4Port(t *testing.T) {
	tests := []struct {
		in   string
		want string // the host text, "" when the shortcut declines
	}{
		{"192.0.2.7:4321", "192.0.2.7"},
		{"192.0.2.7", "192.0.2.7"},
		{"0.0.0.0:0", "0.0.0.0"},
		{"255.255.255.255:65535", "255.255.255.255"},
		{"1.2.3.4:00080", "1.2.3.4"},
		{"1.2.3.4:65536", ""},
		{"1.2.3.4:", ""},
		{"1.2.3.4:_obf", ""}, // the general parser takes obfuscated ports
		{"256.1.1.1", ""},
		{"01.2.3.4", ""},
		{"1.2.3", ""},
		{"1.2.3.4.5", ""},
		{"1..3.4", ""},
		{"1.2.3.4 ", ""},
		{"1234.1.1.1", ""},
		{"::ffff:1.2.3.4", ""},
		{"[1.2.3.4]:80", ""},
		{"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, host, ok := parseIPv4Port(tt.in)
			if host != tt.want || ok != (tt.want != "") {
				t.Errorf("parseIPv4Port(%q) = %q, %v, want %q", tt.in, host, ok, tt.want)
			}
			checkIPv4Port(t, tt.in)
		})
	}
}

func FuzzParseIPv4Port(f *testing.F) {
	for _, s := range []string{"192.0.2.7:4321", "1.2.3.4", "1.2.3.4:_x", "01.2.3.4:1", "255.255.255.256", "9.9.9.9:99999"} {
		f.Add(s)
	}
	f.Fuzz(checkIPv4Port)
}
