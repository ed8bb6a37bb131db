package daemon

import (
	"context"
	"unicode/utf8"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
)

// EventSink records Warning Events on a Service, or on this node's Node, and the start-up
// Events kube-proxy records on its Node.
type EventSink interface {
	Warn(svc types.NamespacedName, reason, message string)
	WarnNode(node, reason, message string)
	// StartNode records an Event of eventType (v1.EventTypeNormal or Warning) on the Node
	// with kube-proxy's action StartKubeProxy: Starting, or a failure to start.
	StartNode(node, eventType, reason, message string)
}

// ActionStart is the action of the Events StartNode records, kube-proxy's.
const ActionStart = "StartKubeProxy"

// apiEvents writes events.k8s.io/v1 Events through the API, reported by "kipvs" from this
// node, with client-go's correlation (repeats become a series, not a flood).
type apiEvents struct {
	rec events.EventRecorder
}

// NewAPIEvents starts an event broadcaster that runs until ctx ends.
func NewAPIEvents(ctx context.Context, client kubernetes.Interface, nodeName string) EventSink {
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
	b.StartRecordingToSink(ctx.Done())
	return &apiEvents{rec: b.NewRecorder(scheme.Scheme, "kipvs")}
}

func (e *apiEvents) Warn(svc types.NamespacedName, reason, message string) {
	ref := &v1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: svc.Namespace, Name: svc.Name}
	e.rec.Eventf(ref, nil, v1.EventTypeWarning, reason, "Programming", "%s", fitNote(message))
}

// WarnNode records a Warning Event on a Node, referenced as kube-proxy references its node
// (the UID is the node name).
func (e *apiEvents) WarnNode(node, reason, message string) {
	ref := &v1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node, UID: types.UID(node)}
	e.rec.Eventf(ref, nil, v1.EventTypeWarning, reason, "Configuration", "%s", fitNote(message))
}

func (e *apiEvents) StartNode(node, eventType, reason, message string) {
	ref := &v1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node, UID: types.UID(node)}
	e.rec.Eventf(ref, nil, eventType, reason, ActionStart, "%s", fitNote(message))
}

// maxNote is the longest note the apiserver accepts in an events.k8s.io/v1 Event; a longer
// one is rejected whole ("can have at most 1024 characters") and the Event is lost.
const maxNote = 1024

// fitNote shortens a message to maxNote bytes at a rune boundary, ending it with "..." when
// it was cut; the log line keeps the whole message.
func fitNote(msg string) string {
	if len(msg) <= maxNote {
		return msg
	}
	cut := maxNote - len("...")
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "..."
}

// sendEvents sends, every eventTick and once more at the end, the Events that waited for
// their interval (the daemon flushes after each sync too).
func (d *Daemon) sendEvents(ctx context.Context) {
	t := d.deps.Clock.NewTicker(eventTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			d.events.flush()
			return
		case <-t.C():
			d.events.flush()
		}
	}
}
