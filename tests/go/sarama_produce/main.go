// sarama_produce: Sarama 1.22.1 (from the Go module proxy, pinned by go.sum) produces records
// with the timestamps it is given, as one batch per partition, and prints each record's offset.
//
//	sarama_produce -brokers HOST:PORT -topic T -timestamps 1700000000000,1700000001000 [-compression gzip]
//
// Sarama 1.22 writes its v2 record batches with maxTimestamp -1 (Go's zero time.Time): the
// broker must take the batch's largest timestamp from its records, as Kafka's log validation does.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/Shopify/sarama"
)

func main() {
	brokers := flag.String("brokers", "", "bootstrap address")
	topic := flag.String("topic", "", "topic")
	partition := flag.Int("partition", 0, "partition")
	stamps := flag.String("timestamps", "", "record timestamps in ms, comma-separated")
	compression := flag.String("compression", "none", "none, gzip, snappy or lz4")
	flag.Parse()

	config := sarama.NewConfig()
	config.Version = sarama.V2_0_0_0 // record batches (magic 2)
	config.ClientID = "sarama-1.22"
	config.Producer.RequiredAcks = sarama.WaitForAll
	config.Producer.Return.Successes = true
	config.Producer.Partitioner = sarama.NewManualPartitioner
	config.Producer.Flush.Frequency = 200 * time.Millisecond // all of them in one batch
	codecs := map[string]sarama.CompressionCodec{
		"none": sarama.CompressionNone, "gzip": sarama.CompressionGZIP, "snappy": sarama.CompressionSnappy, "lz4": sarama.CompressionLZ4,
	}
	codec, ok := codecs[*compression]
	if !ok {
		fail("unknown compression %q", *compression)
	}
	config.Producer.Compression = codec

	producer, err := sarama.NewSyncProducer([]string{*brokers}, config)
	if err != nil {
		fail("producer: %v", err)
	}
	defer producer.Close()
	var messages []*sarama.ProducerMessage
	for i, field := range strings.Split(*stamps, ",") {
		ms, err := strconv.ParseInt(field, 10, 64)
		if err != nil {
			fail("timestamp %q: %v", field, err)
		}
		messages = append(messages, &sarama.ProducerMessage{
			Topic:     *topic,
			Partition: int32(*partition),
			Key:       sarama.StringEncoder(fmt.Sprintf("k%d", i)),
			Value:     sarama.StringEncoder(fmt.Sprintf("v%d", i)),
			Timestamp: time.Unix(0, ms*int64(time.Millisecond)),
		})
	}
	if err := producer.SendMessages(messages); err != nil {
		fail("send: %v", err)
	}
	for _, m := range messages {
		fmt.Printf("%d %d\n", m.Partition, m.Offset)
	}
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "sarama_produce: "+format+"\n", args...)
	os.Exit(1)
}
