//go:build !linux

package redisstore

import "os/exec"

// dieWithTest is dieWithTest of server_linux_test.go, which other systems
// lack: there a private redis-server left by a killed test stays up.
func dieWithTest(*exec.Cmd) {}
