// The native NATS JetStream load generator of `ledgermq bench peers` (Debian's golang-go and
// golang-github-nats-io-go-nats-dev; built at run time in GOPATH mode into a temporary directory).
//
// It runs one workload with the shapes of benchmarks/broker.py: -producers goroutines, each
// publishing -batch messages of -size bytes back to back (PublishAsync, then waits for every
// PubAck; a batch of 1 is a synchronous Publish), paced at -rate msgs/s when given; or, with
// -consume N, reads N messages from the stream through one pull consumer (Fetch -fetch).
// On stdout it prints "window-start" and "window-end" when the measured window opens and closes
// (the harness reads the servers' CPU then), and last one JSON line with the counts, the
// latency percentiles per call and its own CPU over the window.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
)

type result struct {
	Messages int     `json:"messages"`
	Seconds  float64 `json:"seconds"`
	Errors   int     `json:"errors"`
	P50Ms    float64 `json:"p50_ms"`
	P99Ms    float64 `json:"p99_ms"`
	MaxMs    float64 `json:"max_ms"`
	CPUs     float64 `json:"cpu_s"`
}

func cpuSeconds() float64 {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		return 0
	}
	return float64(usage.Utime.Nano()+usage.Stime.Nano()) / 1e9
}

func percentile(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(float64(len(sorted))*p/100 + 0.999999)
	if rank < 1 {
		rank = 1
	}
	return float64(sorted[rank-1].Microseconds()) / 1000
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

func main() {
	servers := flag.String("servers", "nats://127.0.0.1:4222", "comma-separated server URLs")
	subject := flag.String("subject", "bench.go", "subject to publish to")
	stream := flag.String("stream", "BENCH", "stream to consume from")
	producers := flag.Int("producers", 4, "publishers in parallel")
	batch := flag.Int("batch", 64, "messages per call")
	size := flag.Int("size", 1024, "body bytes")
	rate := flag.Float64("rate", 0, "messages/s to offer (0: as fast as acks allow)")
	duration := flag.Duration("duration", 10*time.Second, "measured window")
	warmup := flag.Duration("warmup", time.Second, "run before the window opens")
	consume := flag.Int("consume", 0, "read this many messages instead of publishing")
	fetch := flag.Int("fetch", 256, "messages per Fetch")
	flag.Parse()

	nc, err := nats.Connect(*servers)
	if err != nil {
		fail("connect: %v", err)
	}
	defer nc.Close()
	js, err := nc.JetStream(nats.PublishAsyncMaxPending(65536))
	if err != nil {
		fail("jetstream: %v", err)
	}
	if *consume > 0 {
		consumeAll(js, *stream, *consume, *fetch, *duration)
		return
	}
	body := make([]byte, *size)
	var mu sync.Mutex
	var latencies []time.Duration
	acked, errors := 0, 0
	begin := time.Now()
	start := begin.Add(*warmup)
	end := start.Add(*duration)
	interval := time.Duration(0)
	if *rate > 0 {
		interval = time.Duration(float64(*producers**batch) / *rate * float64(time.Second))
	}
	var wg sync.WaitGroup
	for i := 0; i < *producers; i++ {
		wg.Add(1)
		go func(index int) {
			defer wg.Done()
			next := begin
			if interval > 0 {
				next = begin.Add(interval * time.Duration(index) / time.Duration(*producers))
			}
			for time.Now().Before(end) {
				if interval > 0 {
					if wait := time.Until(next); wait > 0 {
						time.Sleep(wait)
					}
					next = next.Add(interval)
				}
				sent := time.Now()
				ok := true
				if *batch == 1 {
					_, err := js.Publish(*subject, body)
					ok = err == nil
				} else {
					futures := make([]nats.PubAckFuture, 0, *batch)
					for j := 0; j < *batch; j++ {
						f, err := js.PublishAsync(*subject, body)
						if err != nil {
							ok = false
							break
						}
						futures = append(futures, f)
					}
					for _, f := range futures {
						select {
						case <-f.Ok():
						case <-f.Err():
							ok = false
						}
					}
				}
				done := time.Now()
				mu.Lock()
				if !ok {
					errors++
				} else if !done.Before(start) && !done.After(end) {
					latencies = append(latencies, done.Sub(sent))
					acked += *batch
				}
				mu.Unlock()
			}
		}(i)
	}
	time.Sleep(time.Until(start))
	fmt.Println("window-start")
	cpu0 := cpuSeconds()
	time.Sleep(time.Until(end))
	cpu1 := cpuSeconds()
	fmt.Println("window-end")
	wg.Wait()
	report(acked, duration.Seconds(), errors, latencies, cpu1-cpu0)
}

func consumeAll(js nats.JetStreamContext, stream string, count, fetch int, limit time.Duration) {
	sub, err := js.PullSubscribe("", "go-reader", nats.BindStream(stream), nats.AckNone(),
		nats.DeliverAll())
	if err != nil {
		fail("pull subscribe: %v", err)
	}
	var latencies []time.Duration
	received := 0
	fmt.Println("window-start")
	cpu0 := cpuSeconds()
	begin := time.Now()
	for received < count && time.Since(begin) < limit {
		sent := time.Now()
		msgs, err := sub.Fetch(fetch, nats.MaxWait(2*time.Second))
		if err != nil && len(msgs) == 0 {
			break
		}
		latencies = append(latencies, time.Since(sent))
		received += len(msgs)
	}
	seconds := time.Since(begin).Seconds()
	cpu1 := cpuSeconds()
	fmt.Println("window-end")
	report(received, seconds, 0, latencies, cpu1-cpu0)
}

func report(messages int, seconds float64, errors int, latencies []time.Duration, cpu float64) {
	sort.Slice(latencies, func(a, b int) bool { return latencies[a] < latencies[b] })
	out := result{Messages: messages, Seconds: seconds, Errors: errors, CPUs: cpu,
		P50Ms: percentile(latencies, 50), P99Ms: percentile(latencies, 99)}
	if len(latencies) > 0 {
		out.MaxMs = float64(latencies[len(latencies)-1].Microseconds()) / 1000
	}
	line, _ := json.Marshal(out)
	fmt.Println(string(line))
}
