// sync-bench's Go side, built by sync-bench with `go build` (standard
// library only):
//
//	sync-bench-go BATCHES N
//
// prints "what name value..." lines, one value per batch, in ns per
// operation, as src/prims.rs does for the Rust primitives:
//
//	lock_uncontended go     sync.Mutex Lock+Unlock, one goroutine
//	lock_contended go       the same, two goroutines hammering one mutex
//	                        (GOMAXPROCS=2), per lock+unlock of either
//
// The channel round trip is green-bench's Go program's `micro chan`.
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"
)

// batches runs op(n) (which returns the operations it did) once as a
// warm-up, then `count` times, and prints ns per operation of each.
func batches(what string, count, n int, op func(n int) int) {
	op(n/10 + 1)
	fmt.Printf("%s go", what)
	for b := 0; b < count; b++ {
		t := time.Now()
		ops := op(n)
		fmt.Printf(" %.3f", float64(time.Since(t).Nanoseconds())/float64(ops))
	}
	fmt.Println()
}

var counter uint64

func uncontended(n int) int {
	var m sync.Mutex
	for i := 0; i < n; i++ {
		m.Lock()
		counter++
		m.Unlock()
	}
	return n
}

func contended(n int) int {
	var m sync.Mutex
	var wg sync.WaitGroup
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n/2; i++ {
				m.Lock()
				counter++
				m.Unlock()
			}
		}()
	}
	wg.Wait()
	return n / 2 * 2
}

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: sync-bench-go BATCHES N")
		os.Exit(2)
	}
	count, _ := strconv.Atoi(os.Args[1])
	n, _ := strconv.Atoi(os.Args[2])
	runtime.GOMAXPROCS(2)
	batches("lock_uncontended", count, n, uncontended)
	batches("lock_contended", count, n, contended)
}
