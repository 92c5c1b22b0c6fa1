package main

import "testing"

func TestSelfTest(t *testing.T) {
	if err := selfTest(""); err != nil {
		t.Fatal(err)
	}
}
