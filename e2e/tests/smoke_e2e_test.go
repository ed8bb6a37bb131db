//go:build e2e

package tests

import (
	"context"
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func TestAPIServerReachableFromVM(t *testing.T) {
	kc := os.Getenv("KIPVS_E2E_KUBECONFIG")
	if kc == "" {
		t.Fatal("KIPVS_E2E_KUBECONFIG not set: run through e2erun")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	svcs, err := cs.CoreV1().Services("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("services in default: %d", len(svcs.Items))
}
