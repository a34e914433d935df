package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/raven-net/raven/internal/cni/wire"
)

// send posts one request to raven-node on the socket and returns its response. Any failure to talk to
// the daemon is a types.Error with code 50 (plugin not available) saying what to look at.
func send(ctx context.Context, socket string, req wire.Request) (wire.Response, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return wire.Response{}, types.NewError(types.ErrInternal, "encoding the request for raven-node", err.Error())
	}
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://raven-node"+wire.Path, bytes.NewReader(body))
	if err != nil {
		return wire.Response{}, types.NewError(types.ErrInternal, "building the request for raven-node", err.Error())
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(hreq)
	if err != nil {
		return wire.Response{}, types.NewError(types.ErrPluginNotAvailable,
			fmt.Sprintf("raven-node not reachable at %s: is the raven-node DaemonSet running on this node?", socket), err.Error())
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return wire.Response{}, types.NewError(types.ErrPluginNotAvailable,
			fmt.Sprintf("raven-node at %s hung up before answering %s: did it restart?", socket, req.Command), err.Error())
	}
	if resp.StatusCode != http.StatusOK {
		return wire.Response{}, types.NewError(types.ErrInternal,
			fmt.Sprintf("raven-node at %s refused the %s request (HTTP %d); are raven-cni and raven-node the same version?", socket, req.Command, resp.StatusCode),
			string(bytes.TrimSpace(data)))
	}
	var out wire.Response
	if err := json.Unmarshal(data, &out); err != nil {
		return wire.Response{}, types.NewError(types.ErrDecodingFailure, fmt.Sprintf("raven-node at %s answered something that is not a CNI response", socket), err.Error())
	}
	return out, nil
}
