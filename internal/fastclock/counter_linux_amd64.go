//go:build !purego

package fastclock

import (
	"bytes"
	"os"
)

// rdtsc returns the time-stamp counter (counter_linux_amd64.s).
func rdtsc() uint64

// cpuid returns the CPUID leaf eaxArg, subleaf ecxArg.
func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)

// clocksource is the file that names the kernel's clock source.
const clocksource = "/sys/devices/system/clocksource/clocksource0/current_clocksource"

// counter returns rdtsc when the CPU says its time-stamp counter is
// invariant (it ticks at one rate in every power state: CPUID
// 0x80000007, EDX bit 8) and the kernel keeps its own clock on it (which
// it does only once it has found it synchronised across CPUs); else nil.
func counter() func() uint64 {
	if max, _, _, _ := cpuid(0x80000000, 0); max < 0x80000007 {
		return nil
	}
	if _, _, _, edx := cpuid(0x80000007, 0); edx&(1<<8) == 0 {
		return nil
	}
	if b, err := os.ReadFile(clocksource); err != nil || !bytes.Equal(bytes.TrimSpace(b), []byte("tsc")) {
		return nil
	}
	return rdtsc
}
