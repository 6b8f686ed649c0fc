package idemsqs_test

import (
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/testsupport"
)

// BenchmarkVPCSQSBatch10 is BenchmarkSQSBatch10 through a proxy adding 100 µs to each direction
// of a round trip, as pkg/idem's VPC benchmarks do: `make bench` compares it with
// BenchmarkVPCFloorSetNX, a bare SET NX through the same kind of proxy.
func BenchmarkVPCSQSBatch10(b *testing.B) {
	benchSQSBatch10(b, testsupport.StartLatencyProxy(b, testsupport.StartRedis(b).Addr(), 100*time.Microsecond).Addr())
}
