package main

import (
	"slices"
	"testing"
)

func TestParsePorts(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []port
		wantErr bool
	}{
		{name: "nothing set serves no extra port", in: "", want: nil},
		{name: "a bare number is TCP", in: "8080", want: []port{{Number: 8080}}},
		{name: "protocols are read in any case", in: "53/udp,53/UDP,9000/Tcp",
			want: []port{{Number: 53, UDP: true}, {Number: 53, UDP: true}, {Number: 9000}}},
		{name: "spaces and a trailing comma are tolerated", in: " 81 , 82/UDP ,", want: []port{{Number: 81}, {Number: 82, UDP: true}}},
		{name: "a word is an error", in: "http", wantErr: true},
		{name: "port zero is an error", in: "0", wantErr: true},
		{name: "a port above 65535 is an error", in: "65536/TCP", wantErr: true},
		{name: "an unknown protocol is an error", in: "80/SCTP", wantErr: true},
		{name: "one bad entry among good ones is an error", in: "80,x/UDP", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parsePorts(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parsePorts(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("parsePorts(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestWithDefaultPorts(t *testing.T) {
	got := withDefaultPorts([]port{{Number: 53, UDP: true}, {Number: 80}, {Number: 8080}})
	want := []port{{Number: 80}, {Number: 8080}, {Number: 53, UDP: true}, {Number: 80, UDP: true}}
	if !slices.Equal(got, want) {
		t.Errorf("withDefaultPorts = %v, want %v", got, want)
	}
}
