// Package lease decides shared limits in process.
package lease
