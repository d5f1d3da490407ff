// cairn-franz runs one short exactly-once scenario of franz-go (kgo)
// against a broker and prints one JSON line of what the client observed;
// tests/e2e/test_franz_go.py checks it, and reads the topics itself.
//
//	cairn-franz idem BOOTSTRAP TOPIC N
//	cairn-franz txn BOOTSTRAP TOPIC TXNID
//	cairn-franz rpw BOOTSTRAP IN OUT GROUP TXNID N PER_TXN ABORT_AT
//	cairn-franz fence BOOTSTRAP TOPIC TXNID
//
// Every scenario has one deadline (ctx) so a hung client ends the program
// with an error instead of hanging the test.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const deadline = 120 * time.Second

func main() {
	if len(os.Args) < 3 {
		fail(errors.New("usage: cairn-franz idem|txn|rpw|fence BOOTSTRAP ..."))
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	boot, args := os.Args[2], os.Args[3:]
	var out any
	var err error
	switch os.Args[1] {
	case "idem":
		out, err = idem(ctx, boot, args[0], atoi(args[1]))
	case "txn":
		out, err = txn(ctx, boot, args[0], args[1])
	case "rpw":
		out, err = rpw(ctx, boot, args[0], args[1], args[2], args[3],
			atoi(args[4]), atoi(args[5]), atoi(args[6]))
	case "fence":
		out, err = fence(ctx, boot, args[0], args[1])
	default:
		err = fmt.Errorf("unknown scenario %q", os.Args[1])
	}
	if err != nil {
		fail(err)
	}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "cairn-franz:", err)
	os.Exit(1)
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		fail(err)
	}
	return n
}

func client(boot string, opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(boot)},
		opts...)...)
}

// produce sends values to topic partition 0 and returns their offsets.
func produce(ctx context.Context, cl *kgo.Client, topic string,
	values ...string) ([]int64, error) {
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		recs[i] = &kgo.Record{Topic: topic, Value: []byte(v)}
	}
	res := cl.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		return nil, err
	}
	offs := make([]int64, len(res))
	for i, r := range res {
		offs[i] = r.Record.Offset
	}
	return offs, nil
}

func seq(prefix string, from, to int) []string {
	var vs []string
	for i := from; i < to; i++ {
		vs = append(vs, fmt.Sprintf("%s%d", prefix, i))
	}
	return vs
}

// idem: the default producer is idempotent (InitProducerId, sequences).
func idem(ctx context.Context, boot, topic string, n int) (any, error) {
	cl, err := client(boot, kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	offs, err := produce(ctx, cl, topic, seq("v", 0, n)...)
	if err != nil {
		return nil, err
	}
	return map[string]any{"offsets": offs}, nil
}

// txn: commit c0-c4, abort a0-a4, commit c5-c9 with one transactional
// producer; the offsets each got.
func txn(ctx context.Context, boot, topic, tid string) (any, error) {
	cl, err := client(boot, kgo.TransactionalID(tid))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	out := map[string]any{}
	steps := []struct {
		name   string
		values []string
		end    kgo.TransactionEndTry
	}{
		{"commit1", seq("c", 0, 5), kgo.TryCommit},
		{"abort", seq("a", 0, 5), kgo.TryAbort},
		{"commit2", seq("c", 5, 10), kgo.TryCommit},
	}
	for _, s := range steps {
		if err := cl.BeginTransaction(); err != nil {
			return nil, err
		}
		offs, err := produce(ctx, cl, topic, s.values...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		if err := cl.EndTransaction(ctx, s.end); err != nil {
			return nil, fmt.Errorf("%s: end: %w", s.name, err)
		}
		out[s.name] = offs
	}
	// franz-go's own consumers, up to the last committed record: the
	// aborted records are dropped by the read_committed one only.
	for name, level := range map[string]kgo.IsolationLevel{
		"read_committed":   kgo.ReadCommitted(),
		"read_uncommitted": kgo.ReadUncommitted(),
	} {
		got, err := readUntil(ctx, boot, topic, level, "c9")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[name] = got
	}
	return out, nil
}

// readUntil consumes topic from the start and returns "offset:value" of
// each record up to and including the one whose value is last.
func readUntil(ctx context.Context, boot, topic string,
	level kgo.IsolationLevel, last string) ([]string, error) {
	cl, err := client(boot, kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(level),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var got []string
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("after %v: %w", got, err)
		}
		if errs := fs.Errors(); len(errs) > 0 {
			return nil, errs[0].Err
		}
		for _, r := range fs.Records() {
			got = append(got, fmt.Sprintf("%d:%s", r.Offset, r.Value))
			if string(r.Value) == last {
				return got, nil
			}
		}
	}
}

// rpw: a GroupTransactSession reads IN (read_committed), writes
// "out-"+value to OUT's same partition and commits the consumed offsets
// in the same transaction, at most perTxn records a transaction; the
// abortAt-th transaction (1-based) is aborted on purpose, so its records
// must be read again and written once.  Stops once n input records were
// committed.
func rpw(ctx context.Context, boot, in, outTopic, group, tid string,
	n, perTxn, abortAt int) (any, error) {
	s, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(boot),
		kgo.TransactionalID(tid), kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(in), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return nil, err
	}
	defer s.Close()
	done := map[string]bool{} // partition/offset of committed input
	var txns, commits, aborts, abortedRecords, rereads int
	for len(done) < n {
		fs := s.PollRecords(ctx, perTxn)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("after %d of %d records: %w",
				len(done), n, err)
		}
		if errs := fs.Errors(); len(errs) > 0 {
			return nil, fmt.Errorf("fetch: %v", errs[0].Err)
		}
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		if err := s.Begin(); err != nil {
			return nil, err
		}
		txns++
		var batch []string
		for _, r := range recs {
			key := fmt.Sprintf("%d/%d", r.Partition, r.Offset)
			if done[key] {
				rereads++ // committed before: must not happen
			}
			batch = append(batch, key)
			s.Produce(ctx, &kgo.Record{Topic: outTopic,
				Partition: r.Partition, Key: r.Key,
				Value: append([]byte("out-"), r.Value...)}, nil)
		}
		want := kgo.TryCommit
		if txns == abortAt {
			// An abort drops records not sent yet: send them first,
			// so the aborted records are in the log.
			if err := s.Client().Flush(ctx); err != nil {
				return nil, err
			}
			want = kgo.TryAbort
		}
		committed, err := s.End(ctx, want)
		if err != nil {
			return nil, fmt.Errorf("end of transaction %d: %w", txns, err)
		}
		if committed {
			commits++
			for _, k := range batch {
				done[k] = true
			}
		} else {
			aborts++
			abortedRecords += len(batch)
		}
	}
	out := map[string]any{
		"transactions":         txns,
		"commits":              commits,
		"aborts":               aborts,
		"aborted_records":      abortedRecords,
		"committed_records":    len(done),
		"rereads_after_commit": rereads,
	}
	return out, nil
}

// fence: a zombie (first client) has a transaction open when a second
// client with the same transactional id starts and commits.  Twice, with
// ids TXNID-p and TXNID-c: the first zombie then produces (refused by the
// partition), the second commits (refused by the coordinator).
func fence(ctx context.Context, boot, topic, tid string) (any, error) {
	out := map[string]any{}
	for _, mode := range []string{"produce", "commit"} {
		err := fenceOnce(ctx, boot, topic, tid+"-"+mode[:1], mode, out)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", mode, err)
		}
	}
	return out, nil
}

func fenceOnce(ctx context.Context, boot, topic, tid, mode string,
	out map[string]any) error {
	zombie, err := client(boot, kgo.TransactionalID(tid))
	if err != nil {
		return err
	}
	defer zombie.Close()
	if err := zombie.BeginTransaction(); err != nil {
		return err
	}
	if _, err := produce(ctx, zombie, topic, "zombie-"+mode); err != nil {
		return fmt.Errorf("zombie's first produce: %w", err)
	}

	fresh, err := client(boot, kgo.TransactionalID(tid))
	if err != nil {
		return err
	}
	defer fresh.Close()
	if err := fresh.BeginTransaction(); err != nil {
		return err
	}
	if _, err := produce(ctx, fresh, topic, "fresh-"+mode); err != nil {
		return fmt.Errorf("new producer's produce: %w", err)
	}
	if err := fresh.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("new producer's commit: %w", err)
	}

	// The zombie's epoch is behind now.
	if mode == "produce" {
		_, err = produce(ctx, zombie, topic, "zombie-produce-2")
	} else {
		err = zombie.EndTransaction(ctx, kgo.TryCommit)
	}
	out["zombie_"+mode+"_error"] = errName(err)
	return nil
}

// errName is the Kafka error's name (PRODUCER_FENCED...), the error text
// for other errors, "" for none.
func errName(err error) string {
	if err == nil {
		return ""
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	return err.Error()
}
