package main

import (
	"reflect"
	"testing"
)

func TestStore(t *testing.T) {
	s := store{dir: t.TempDir() + "/state"}
	if got, err := s.list(); err != nil || len(got) != 0 {
		t.Fatalf("empty store lists %v, %v", got, err)
	}
	a := &sandbox{Namespace: "default", Name: "web", UID: "u1", Netns: netnsName("default", "web"), IfName: "eth0"}
	b := &sandbox{Namespace: "other", Name: "db", UID: "u2", Netns: netnsName("other", "db"), IfName: "eth0", ID: "x", Ready: true, IP: "10.0.0.2", PID: 7}
	for _, sb := range []*sandbox{a, b} {
		if err := s.save(sb); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.load("other_db")
	if err != nil || !reflect.DeepEqual(got, b) {
		t.Errorf("load = %+v, %v", got, err)
	}
	if err := s.remove("default_web"); err != nil {
		t.Fatal(err)
	}
	if err := s.remove("default_web"); err != nil {
		t.Errorf("second remove: %v", err)
	}
	all, err := s.list()
	if err != nil || len(all) != 1 || all[0].Name != "db" {
		t.Errorf("list = %+v, %v", all, err)
	}
	if missing, err := s.load("nope_nope"); missing != nil || err != nil {
		t.Errorf("load of a missing sandbox = %v, %v", missing, err)
	}
}
