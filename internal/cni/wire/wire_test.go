package wire

import (
	"strings"
	"testing"
)

func TestParsePod(t *testing.T) {
	tests := []struct {
		name    string
		args    string
		want    Pod
		wantErr string
	}{
		{
			name: "the kubelet's keys",
			args: "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=abc;K8S_POD_UID=u-1",
			want: Pod{Namespace: "default", Name: "web-0", UID: "u-1"},
		},
		{name: "unknown keys are ignored", args: "K8S_POD_NAMESPACE=a;K8S_POD_NAME=b;OTHER=x", want: Pod{Namespace: "a", Name: "b"}},
		{name: "no pod name", args: "K8S_POD_NAMESPACE=a", wantErr: "lacks K8S_POD_NAMESPACE or K8S_POD_NAME"},
		{name: "nothing at all", args: "", wantErr: "lacks"},
		{name: "not key=value", args: "garbage", wantErr: "parsing CNI_ARGS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParsePod(tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParsePod = %v, want error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("ParsePod = %+v, %v, want %+v", got, err, tt.want)
			}
		})
	}
}

func TestParseNetConf(t *testing.T) {
	tests := []struct {
		name, in, wantSocket string
	}{
		{name: "the default socket", in: `{"cniVersion":"1.1.0","type":"raven-cni"}`, wantSocket: DefaultSocket},
		{name: "a socket of its own", in: `{"cniVersion":"1.1.0","type":"raven-cni","socket":"/x/y.sock"}`, wantSocket: "/x/y.sock"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseNetConf([]byte(tt.in))
			if err != nil || c.Socket != tt.wantSocket || c.CNIVersion != "1.1.0" {
				t.Errorf("ParseNetConf = %+v, %v", c, err)
			}
		})
	}
	if _, err := ParseNetConf([]byte("{")); err == nil {
		t.Error("broken JSON accepted")
	}
}
