package idem

import (
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/testsupport"
)

// vpcLatency is what the proxy of the VPC benchmarks adds to each direction of a round trip:
// 100 µs, so about 0.2 ms more per round trip than loopback, the order of a round trip between a
// Lambda function and ElastiCache in the same VPC and availability zone. The loopback benchmarks
// stay the reference; these show the same ratios where the network, not the CPU, is the cost.
const vpcLatency = 100 * time.Microsecond

// vpcClient connects to a private redis-server through a proxy adding vpcLatency each way.
func vpcClient(b *testing.B) benchConn {
	return benchClientAt(b, testsupport.StartLatencyProxy(b, testsupport.StartRedis(b).Addr(), vpcLatency).Addr())
}

// BenchmarkVPCFloorSetNX is BenchmarkFloorSetNX through a proxy adding vpcLatency each way.
func BenchmarkVPCFloorSetNX(b *testing.B) { benchFloorSetNX(b, vpcClient(b)) }

// BenchmarkVPCBatchFirstDelivery10 is BenchmarkBatchFirstDelivery10 through a proxy adding
// vpcLatency each way: compare it with BenchmarkVPCFloorSetNX.
func BenchmarkVPCBatchFirstDelivery10(b *testing.B) { benchBatchFirstDelivery10(b, vpcClient(b)) }

// The paired benchmarks of the budgeted paths through the proxy: each path and its floor on one
// server behind it, in alternating blocks (testsupport.BenchPair), as the loopback pairs.

func BenchmarkVPCPairReplay(b *testing.B) { testsupport.BenchPair(b, replayPair(b, vpcClient(b))) }

func BenchmarkVPCPairFirstExecution(b *testing.B) {
	testsupport.BenchPair(b, firstExecutionPair(b, vpcClient(b)))
}

func BenchmarkVPCPairBatchFirstDelivery10(b *testing.B) {
	testsupport.BenchPair(b, batchFirstDelivery10Pair(b, vpcClient(b)))
}
