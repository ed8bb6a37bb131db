package faulty

import (
	"errors"
	"testing"
)

func TestSwitchAndHook(t *testing.T) {
	var fake struct {
		Switch
		Hook[func(op string) error]
	}
	if fake.Injector() != nil || fake.Fault() != nil {
		t.Fatal("a new fake has an Injector or a hook")
	}
	in := New(1, 1)
	fake.SetFaulty(in)
	if fake.Injector() != in {
		t.Fatal("SetFaulty did not install the Injector")
	}
	if err := fake.Injector().Mutation("x"); !IsInjected(err) {
		t.Fatalf("the installed Injector did not fail a mutation at p=1: %v", err)
	}
	boom := errors.New("boom")
	fake.SetFault(func(string) error { return boom })
	if err := fake.Fault()("x"); err != boom {
		t.Fatalf("hook: %v", err)
	}
	fake.SetFault(nil)
	fake.SetFaulty(nil)
	if fake.Injector() != nil || fake.Fault() != nil {
		t.Fatal("nil did not remove the Injector and the hook")
	}
}
