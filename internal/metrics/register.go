package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// newGauge and newCounter make an unlabelled asyncstatus_<subsystem>_<name>
// series; subsystem "" leaves it out.
func newGauge(subsystem, name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Subsystem: subsystem, Name: name, Help: help})
}

func newCounter(subsystem, name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Subsystem: subsystem, Name: name, Help: help})
}

// register registers every collector on reg; the first refusal is the error.
func register(reg *prometheus.Registry, cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("metrics: register: %w", err)
		}
	}
	return nil
}
