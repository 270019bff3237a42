// green-bench's Go side, built by green-bench with `go build` (standard
// library only) and run with GOMAXPROCS=1:
//
//	green-bench-go serve PORT LONG_MS   the web server: a goroutine per connection
//	green-bench-go micro spawn N        spawn+join, one at a time
//	green-bench-go micro chan N         ping-pong over unbuffered channels
//	green-bench-go micro io N           ping-pong over a socketpair (netpoller)
//	green-bench-go micro idle N         memory of N goroutines asleep
//	green-bench-go micro alive CAP SECS BUDGET_KIB   goroutines alive at once
//
// The server does what src/http.rs does in the Rust servers: read until the
// blank line, parse the request line and every header line, answer a fixed
// body on a keep-alive connection, spin LONG_MS of calibrated CPU work first
// for GET /long. Microbenchmarks print "name value..." lines.
package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

var response = []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, world!")
var badRequest = []byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
var crlf = []byte("\r\n")
var blank = []byte("\r\n\r\n")

const maxHead = 4096

//go:noinline
func opaque(x uint64) uint64 { return x }

// work is the request's CPU work: n opaque calls.
func work(n uint64) uint64 {
	acc := uint64(0)
	for i := uint64(0); i < n; i++ {
		acc = opaque(acc ^ i)
	}
	return acc
}

var sink uint64

// perMicro: iterations of work per microsecond here (the fastest of 9
// tries: the least disturbed by the machine's other work).
func perMicro() float64 {
	rates := make([]float64, 9)
	for k := range rates {
		const n = 2000000
		t := time.Now()
		sink += work(n)
		rates[k] = n / time.Since(t).Seconds() / 1e6
	}
	sort.Float64s(rates)
	return rates[len(rates)-1]
}

type request struct{ long, close bool }

// parse: the request at the start of buf and the bytes it took; ok false
// while its head is incomplete; err for a malformed one.
func parse(buf []byte) (r request, used int, ok bool, bad bool) {
	end := bytes.Index(buf, blank)
	if end < 0 {
		return r, 0, false, len(buf) >= maxHead
	}
	head := buf[:end]
	lineEnd := bytes.Index(head, crlf)
	line := head
	rest := []byte(nil)
	if lineEnd >= 0 {
		line, rest = head[:lineEnd], head[lineEnd+2:]
	}
	sp1 := bytes.IndexByte(line, ' ')
	if sp1 <= 0 {
		return r, 0, false, true
	}
	sp2 := bytes.IndexByte(line[sp1+1:], ' ')
	if sp2 < 0 {
		return r, 0, false, true
	}
	target, version := line[sp1+1:sp1+1+sp2], line[sp1+2+sp2:]
	if len(target) == 0 || target[0] != '/' || bytes.IndexByte(version, ' ') >= 0 || !bytes.HasPrefix(version, []byte("HTTP/1.")) {
		return r, 0, false, true
	}
	r.long = string(target) == "/long"
	for lineEnd >= 0 {
		lineEnd = bytes.Index(rest, crlf)
		h := rest
		if lineEnd >= 0 {
			h, rest = rest[:lineEnd], rest[lineEnd+2:]
		}
		colon := bytes.IndexByte(h, ':')
		if colon <= 0 || bytes.IndexByte(h[:colon], ' ') >= 0 {
			return r, 0, false, true
		}
		if bytes.EqualFold(h[:colon], []byte("connection")) && bytes.EqualFold(bytes.TrimSpace(h[colon+1:]), []byte("close")) {
			r.close = true
		}
	}
	return r, end + 4, true, false
}

func handle(c net.Conn, longIters uint64) {
	defer c.Close()
	buf := make([]byte, maxHead)
	out := make([]byte, 0, 256)
	start, have := 0, 0
	for {
		closing := false
		for !closing {
			r, used, ok, bad := parse(buf[start:have])
			if bad {
				out = append(out, badRequest...)
				closing = true
				break
			}
			if !ok {
				break
			}
			start += used
			if start == have {
				start, have = 0, 0
			}
			if r.long {
				sink += work(longIters)
			}
			out = append(out, response...)
			closing = r.close
		}
		if len(out) > 0 {
			if _, err := c.Write(out); err != nil {
				return
			}
			out = out[:0]
		}
		if closing {
			return
		}
		if start > 0 {
			copy(buf, buf[start:have])
			have -= start
			start = 0
		}
		n, err := c.Read(buf[have:])
		if n == 0 || err != nil {
			return
		}
		have += n
	}
}

func serve(port string, longMs float64) {
	longIters := uint64(perMicro() * longMs * 1000)
	ln, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		fmt.Fprintln(os.Stderr, "green-bench-go:", err)
		os.Exit(1)
	}
	fmt.Println("ready")
	for {
		c, err := ln.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, "green-bench-go: accept:", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go handle(c, longIters)
	}
}

// batches runs op(n) in 7 batches; prints the median, min and max of the
// nanoseconds per unit (op returns the units it did).
func batches(name string, n int, op func(n int) int) {
	op(n / 10) // warm-up
	ns := make([]float64, 7)
	for k := range ns {
		t := time.Now()
		units := op(n)
		ns[k] = float64(time.Since(t).Nanoseconds()) / float64(units)
	}
	sort.Float64s(ns)
	fmt.Printf("%s %.2f %.2f %.2f\n", name, ns[3], ns[0], ns[6])
}

func status(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, field+":") {
			f := strings.Fields(l[len(field)+1:])
			if len(f) > 0 {
				v, _ := strconv.ParseInt(f[0], 10, 64)
				return v
			}
		}
	}
	return -1
}

func socketpair() (net.Conn, net.Conn) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		panic(err)
	}
	conn := func(fd int) net.Conn {
		f := os.NewFile(uintptr(fd), "socketpair")
		c, err := net.FileConn(f)
		if err != nil {
			panic(err)
		}
		f.Close()
		return c
	}
	return conn(fds[0]), conn(fds[1])
}

func micro(what string, args []int) {
	switch what {
	case "spawn":
		batches("spawn_join", args[0], func(n int) int {
			var wg sync.WaitGroup
			for i := 0; i < n; i++ {
				wg.Add(1)
				go func() { wg.Done() }()
				wg.Wait()
			}
			return n
		})
	case "chan":
		batches("switch_chan", args[0], func(n int) int {
			ping, pong := make(chan int), make(chan int)
			go func() {
				for v := range ping {
					pong <- v
				}
			}()
			for i := 0; i < n; i++ {
				ping <- i
				<-pong
			}
			close(ping)
			return 2 * n
		})
	case "io":
		batches("switch_io", args[0], func(n int) int {
			a, b := socketpair()
			done := make(chan bool)
			go func() {
				x := make([]byte, 1)
				for {
					if k, err := b.Read(x); k != 1 || err != nil {
						break
					}
					b.Write(x)
				}
				done <- true
			}()
			x := make([]byte, 1)
			for i := 0; i < n; i++ {
				a.Write(x)
				a.Read(x)
			}
			a.Close()
			<-done
			b.Close()
			return 2 * n
		})
	case "idle":
		n := args[0]
		var started sync.WaitGroup
		rss0, pte0 := status("VmRSS"), status("VmPTE")
		started.Add(n)
		for i := 0; i < n; i++ {
			go func() { started.Done(); time.Sleep(time.Hour) }()
		}
		started.Wait()
		time.Sleep(200 * time.Millisecond)
		fmt.Printf("idle %d %d %d %d %d\n", n, rss0, status("VmRSS"), pte0, status("VmPTE"))
	case "alive":
		limit, secs, budget := args[0], args[1], int64(args[2])
		start := time.Now()
		rss0 := status("VmRSS")
		count, reason := 0, fmt.Sprintf("reached the cap of %d", limit)
		var started sync.WaitGroup
		for count < limit {
			if count%10000 == 0 && count > 0 {
				if time.Since(start) > time.Duration(secs)*time.Second {
					reason = fmt.Sprintf("time limit of %d s", secs)
					break
				}
				if status("VmRSS")-rss0 > budget {
					reason = fmt.Sprintf("memory budget of %d MiB", budget/1024)
					break
				}
			}
			started.Add(1)
			go func() { started.Done(); time.Sleep(time.Hour) }()
			count++
		}
		started.Wait()
		fmt.Printf("alive %d %.2f %d\n", count, time.Since(start).Seconds(), status("VmRSS"))
		fmt.Printf("reason %s\n", reason)
	default:
		fmt.Fprintln(os.Stderr, "green-bench-go: unknown micro", what)
		os.Exit(2)
	}
}

func main() {
	if len(os.Args) >= 4 && os.Args[1] == "serve" {
		ms, err := strconv.ParseFloat(os.Args[3], 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, "green-bench-go: LONG_MS:", err)
			os.Exit(2)
		}
		serve(os.Args[2], ms)
		return
	}
	if len(os.Args) >= 4 && os.Args[1] == "micro" {
		var args []int
		for _, a := range os.Args[3:] {
			v, err := strconv.Atoi(a)
			if err != nil {
				fmt.Fprintln(os.Stderr, "green-bench-go: bad number", a)
				os.Exit(2)
			}
			args = append(args, v)
		}
		micro(os.Args[2], args)
		return
	}
	fmt.Fprintln(os.Stderr, "usage: green-bench-go serve PORT LONG_MS | micro WHAT N...")
	os.Exit(2)
}
