// Eight goroutines take turns at one sync.Mutex, each computing 2 ms
// while it holds it: the others park in sync.(*Mutex).lockSlow, and the
// threads that ran them sleep in the scheduler (runtime.futex).
package main

import (
	"fmt"
	"sync"
	"time"
)

var (
	mu      sync.Mutex
	counter uint64
)

func worker() {
	for {
		mu.Lock()
		end := time.Now().Add(2 * time.Millisecond)
		for time.Now().Before(end) {
			counter++
		}
		mu.Unlock()
	}
}

func main() {
	for i := 0; i < 8; i++ {
		go worker()
	}
	fmt.Println("ready")
	time.Sleep(10 * time.Minute)
}
