package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"time"
)

// Model is how long each request takes and how many each service serves at once, as measured on a real
// cloud. The zero Model serves at once, without a limit.
type Model struct {
	// Source says where the figures come from (free text).
	Source string `json:"source"`
	// Workers caps the requests each service serves at once; the others wait their turn. 0: no cap.
	Workers Workers `json:"workers"`
	// Default is the time of an operation that Ops does not list.
	Default Default `json:"default"`
	// Ops are the times by operation, named as openstack.Operation names them (e.g. "neutron port create").
	Ops map[string]Cost `json:"ops"`
}

// Workers are the requests each service serves at once.
type Workers struct {
	Neutron int `json:"neutron"`
	Octavia int `json:"octavia"`
}

// Default is the time of a read (GET) and of a write (any other method) that Model.Ops does not list.
type Default struct {
	ReadMS  float64 `json:"read_ms"`
	WriteMS float64 `json:"write_ms"`
}

// Cost is an operation's time: BaseMS, plus PerItemMS for each object the request carries or the page returns.
type Cost struct {
	BaseMS    float64 `json:"base_ms"`
	PerItemMS float64 `json:"per_item_ms"`
}

// LoadModel reads a Model from a JSON file.
func LoadModel(path string) (Model, error) {
	var m Model
	raw, err := os.ReadFile(path)
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return m, fmt.Errorf("%s: %w", path, err)
	}
	return m, m.validate()
}

func (m Model) validate() error {
	if m.Workers.Neutron < 0 || m.Workers.Octavia < 0 || m.Default.ReadMS < 0 || m.Default.WriteMS < 0 {
		return fmt.Errorf("model: negative workers or default time")
	}
	for op, c := range m.Ops {
		if c.BaseMS < 0 || c.PerItemMS < 0 {
			return fmt.Errorf("model: negative time for %q", op)
		}
	}
	return nil
}

// serviceTime is how long a request of op (sent with method) carrying or returning items objects takes.
func (m Model) serviceTime(op, method string, items int) time.Duration {
	ms := m.Default.WriteMS
	if method == http.MethodGet || method == http.MethodHead {
		ms = m.Default.ReadMS
	}
	if c, ok := m.Ops[op]; ok {
		ms = c.BaseMS + c.PerItemMS*float64(items)
	}
	return time.Duration(ms * float64(time.Millisecond))
}
