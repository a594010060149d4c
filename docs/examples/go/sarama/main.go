package main

import (
	"context"
	"fmt"
	"os"

	"github.com/IBM/sarama"
)

type handler struct{ done chan struct{} }

func (handler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (handler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h handler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	msg := <-c.Messages()
	fmt.Println(string(msg.Value))
	s.MarkMessage(msg, "")
	s.Commit()
	close(h.done)
	return nil
}

func main() {
	brokers := []string{"127.0.0.1:9092"}
	if len(os.Args) > 1 {
		brokers = os.Args[1:]
	}
	config := sarama.NewConfig()
	config.Producer.Return.Successes = true
	config.Consumer.Offsets.Initial = sarama.OffsetOldest

	producer, err := sarama.NewSyncProducer(brokers, config)
	if err != nil {
		panic(err)
	}
	if _, _, err = producer.SendMessage(&sarama.ProducerMessage{Topic: "greetings", Value: sarama.StringEncoder("hello")}); err != nil {
		panic(err)
	}
	producer.Close()

	group, err := sarama.NewConsumerGroup(brokers, "readers", config)
	if err != nil {
		panic(err)
	}
	h := handler{done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-h.done; cancel() }()
	if err := group.Consume(ctx, []string{"greetings"}, h); err != nil {
		panic(err)
	}
	if err := group.Close(); err != nil {
		panic(err)
	}
}
