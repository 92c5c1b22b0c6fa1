//go:build !race

package redisstore

const raceBuild = false
