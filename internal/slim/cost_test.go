package slim

import (
	"fmt"
	"runtime"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/raven-net/raven/pkg/annotations"
)

// decodedPod is pod i of a Deployment's ReplicaSet in namespace ns-(i/15), annotated by Raven, as the informer
// receives it: decoded from protobuf, so that each field has its own memory.
func decodedPod(t testing.TB, i int) *corev1.Pod {
	ns := fmt.Sprintf("ns-%d", i/15)
	port, err := annotations.Encode(annotations.Port{ID: fmt.Sprintf("%08d-1111-2222-3333-444444444444", i), Name: "raven-" + ns,
		NetworkID: "6f0e6a7e-6f0e-4a7e-9f0e-6f0e6a7e6f0e", TenantID: "0123456789abcdef0123456789abcdef", ProjectID: "0123456789abcdef0123456789abcdef",
		MACAddress: "fa:16:3e:00:11:22", FixedIPs: []annotations.FixedIP{{SubnetID: "7f0e6a7e-6f0e-4a7e-9f0e-6f0e6a7e6f0e", IPAddress: "10.128.3.17"}},
		Status: "DOWN", AdminStateUp: true, DeviceOwner: "compute:kuryr", SecurityGroups: []string{"8f0e6a7e-6f0e-4a7e-9f0e-6f0e6a7e6f0e"},
		HostID: "node-17", VIFType: "ovs", VIFDetails: map[string]any{"port_filter": true, "connectivity": "l2"}, MTU: 1442, PodUID: "uid"})
	if err != nil {
		t.Fatal(err)
	}
	subnet, err := annotations.Encode(annotations.Subnet{ID: "7f0e6a7e-6f0e-4a7e-9f0e-6f0e6a7e6f0e", Name: "raven-" + ns, NetworkID: "6f0e6a7e-6f0e-4a7e-9f0e-6f0e6a7e6f0e",
		TenantID: "0123456789abcdef0123456789abcdef", CIDR: "10.128.3.0/24", GatewayIP: "10.128.3.1", IPVersion: 4,
		AllocationPools: []annotations.AllocationPool{{Start: "10.128.3.2", End: "10.128.3.254"}}, SubnetPoolID: "9f0e6a7e-6f0e-4a7e-9f0e-6f0e6a7e6f0e"})
	if err != nil {
		t.Fatal(err)
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("web-7d9f8c6b5-%05d", i), UID: types.UID(fmt.Sprintf("%08d-aaaa-bbbb-cccc-dddddddddddd", i)),
			ResourceVersion: fmt.Sprint(100000 + i), Labels: map[string]string{"app": "web", "pod-template-hash": "7d9f8c6b5"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d9f8c6b5", UID: "rs"}},
			Annotations:     map[string]string{annotations.PodPort: port, annotations.PodSubnet: subnet}},
		Spec: corev1.PodSpec{NodeName: fmt.Sprintf("node-%d", i%1666), Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.128.3.17", HostIP: "192.168.0.17",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	b, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var out corev1.Pod
	if err := out.Unmarshal(b); err != nil {
		t.Fatal(err)
	}
	return &out
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestCachedPodCost measures what a cached pod costs in an informer's store (with its index by namespace):
// 15 pods per namespace over 1,666 nodes, the scale benchmark's shape. The slim pod without shared values
// cost 3,861 bytes here, and 2,559 with them while it kept its port annotation whole; the corev1.Pod struct
// alone is 1,240.
func TestCachedPodCost(t *testing.T) {
	const n, ceiling = 10000, 2300
	store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	tbl := &Table{}
	before := liveHeap()
	for i := range n {
		// The informer keeps only the transformed pod.
		o, err := tbl.Pod(decodedPod(t, i))
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	perPod := (int64(liveHeap()) - int64(before)) / n
	t.Logf("%d bytes per cached pod (Pod struct %d)", perPod, unsafe.Sizeof(corev1.Pod{}))
	if perPod > ceiling {
		t.Errorf("a cached pod costs %d bytes, more than %d", perPod, ceiling)
	}
	runtime.KeepAlive(store)
}
