package main

import (
	"context"
	"fmt"
	"os"

	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	broker := "127.0.0.1:9092"
	if len(os.Args) > 1 {
		broker = os.Args[1]
	}
	ctx := context.Background()

	producer, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.AllowAutoTopicCreation())
	if err != nil {
		panic(err)
	}
	if err := producer.ProduceSync(ctx, &kgo.Record{Topic: "greetings", Value: []byte("hello")}).FirstErr(); err != nil {
		panic(err)
	}
	producer.Close()

	consumer, err := kgo.NewClient(
		kgo.SeedBrokers(broker),
		kgo.ConsumerGroup("readers"),
		kgo.ConsumeTopics("greetings"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
	)
	if err != nil {
		panic(err)
	}
	defer consumer.Close()
	for {
		fetches := consumer.PollFetches(ctx)
		if errs := fetches.Errors(); len(errs) > 0 {
			panic(fmt.Sprint(errs))
		}
		if fetches.NumRecords() == 0 {
			continue
		}
		fetches.EachRecord(func(r *kgo.Record) { fmt.Println(string(r.Value)) })
		if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
			panic(err)
		}
		return
	}
}
