package main

import (
	"slices"
	"testing"
)

// vsctlLdd is ldd's output for /usr/bin/ovs-vsctl on Debian 12.
const vsctlLdd = `	linux-vdso.so.1 (0x00007f3ee7c20000)
	libssl.so.3 => /lib/x86_64-linux-gnu/libssl.so.3 (0x00007f3ee7b66000)
	libcrypto.so.3 => /lib/x86_64-linux-gnu/libcrypto.so.3 (0x00007f3ee7200000)
	libnuma.so.1 => /lib/x86_64-linux-gnu/libnuma.so.1 (0x00007f3ee7b59000)
	libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f3ee6f17000)
	/lib64/ld-linux-x86-64.so.2 (0x00007f3ee7c22000)
	libz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x00007f3ee7aae000)
`

func TestParseLdd(t *testing.T) {
	tests := []struct {
		name    string
		out     string
		want    []string
		wantErr bool
	}{
		{name: "libraries and the loader are listed in ldd's order, the vDSO is not", out: vsctlLdd, want: []string{
			"/lib/x86_64-linux-gnu/libssl.so.3", "/lib/x86_64-linux-gnu/libcrypto.so.3", "/lib/x86_64-linux-gnu/libnuma.so.1",
			"/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/libz.so.1",
		}},
		{name: "an old glibc's vDSO line with an empty arrow is skipped", out: "\tlinux-gate.so.1 =>  (0x00007ffd)\n\tlibc.so.6 => /lib/libc.so.6 (0x1)\n",
			want: []string{"/lib/libc.so.6"}},
		{name: "a static binary has no library", out: "\tstatically linked\n", want: nil},
		{name: "a file that is not dynamic has no library", out: "\tnot a dynamic executable\n", want: nil},
		{name: "a library not found is an error", out: "\tlibfoo.so.1 => not found\n\tlibc.so.6 => /lib/libc.so.6 (0x1)\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseLdd(tt.out)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseLdd error = %v, want error %v", err, tt.wantErr)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("parseLdd = %q, want %q", got, tt.want)
			}
		})
	}
}
