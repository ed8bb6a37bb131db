package watch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// APISourceOptions configures NewAPISource.
type APISourceOptions struct {
	// Client talks to the apiserver. Required.
	Client kubernetes.Interface
	// NodeName is this node's name (kube-proxy's hostnameOverride or the hostname). Required:
	// only the Node of that name is watched.
	NodeName string
	// ResyncPeriod is the informers' resync period (kube-proxy's configSyncPeriod); 0 disables
	// resync. Resyncs deliver unchanged objects, which cause no changes.
	ResyncPeriod time.Duration
	// Logger is required.
	Logger *zap.Logger
	// Clock stamps the source's start, before which trigger times are ignored. Default: real.
	Clock clock.PassiveClock
	// RetryClock times the retries of ServiceCIDR discovery after it failed. Default: real.
	RetryClock clock.Clock
	// ServiceAnnotations lists the Service annotations the consumer reads: the informer
	// cache keeps only those (nil: all). See trimmer for what else the cache leaves out.
	ServiceAnnotations []string
}

// APISource watches Services, EndpointSlices, this node's Node and, where the API serves
// them, ServiceCIDRs, through client-go shared informers.
type APISource struct {
	*store
	opts    APISourceOptions
	started atomic.Bool
	done    chan struct{}
}

var _ Source = (*APISource)(nil)

// NewAPISource checks opts and returns an unstarted source.
func NewAPISource(opts APISourceOptions) (*APISource, error) {
	var errs []error
	if opts.Client == nil {
		errs = append(errs, errors.New("watch: APISourceOptions.Client is required"))
	}
	if opts.NodeName == "" {
		errs = append(errs, errors.New("watch: APISourceOptions.NodeName is required"))
	}
	if opts.ResyncPeriod < 0 {
		errs = append(errs, fmt.Errorf("watch: APISourceOptions.ResyncPeriod %v is negative", opts.ResyncPeriod))
	}
	if opts.Logger == nil {
		errs = append(errs, errors.New("watch: APISourceOptions.Logger is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.RetryClock == nil {
		opts.RetryClock = clock.RealClock{}
	}
	log := opts.Logger.With(zap.String("source", "api"))
	return &APISource{
		store: newStore(log, opts.Clock),
		opts:  opts,
		done:  make(chan struct{}),
	}, nil
}

func (s *APISource) trimmer() trimmer {
	return trimmer{serviceAnnotations: s.opts.ServiceAnnotations}
}

// Done is closed once every informer goroutine has exited after ctx was cancelled.
func (s *APISource) Done() <-chan struct{} { return s.done }

// proxySelector is kube-proxy's server-side filter for Services and EndpointSlices: objects
// that want another proxy, and the slices of headless Services, are never sent to us.
func proxySelector() (string, error) {
	noProxyName, err := labels.NewRequirement(LabelServiceProxyName, selection.DoesNotExist, nil)
	if err != nil {
		return "", fmt.Errorf("building label selector: %w", err)
	}
	noHeadless, err := labels.NewRequirement(v1.IsHeadlessService, selection.DoesNotExist, nil)
	if err != nil {
		return "", fmt.Errorf("building label selector: %w", err)
	}
	return labels.NewSelector().Add(*noProxyName, *noHeadless).String(), nil
}

// serviceCIDRServed asks discovery whether networking.k8s.io/v1 serves servicecidrs.
// A NotFound group version means "not served"; other errors are returned.
func serviceCIDRServed(d discovery.DiscoveryInterface) (bool, error) {
	gv := networkingv1.SchemeGroupVersion.String()
	list, err := d.ServerResourcesForGroupVersion(gv)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("discovering %s: %w", gv, err)
	}
	for _, r := range list.APIResources {
		if r.Name == "servicecidrs" {
			return true, nil
		}
	}
	return false, nil
}

// Backoff of the ServiceCIDR discovery retries: the first after discoveryRetryFirst, each
// next one twice as late, at most discoveryRetryMax apart.
const (
	discoveryRetryFirst = time.Second
	discoveryRetryMax   = 2 * time.Minute
)

// Start creates and starts the informers. It returns after starting them; sync completes in
// the background (see WaitForSync). When ServiceCIDR discovery fails for another reason
// than "not served" (the apiserver is not reachable yet), the source learns service CIDRs
// from default/kubernetes and retries discovery with backoff until it answers; if the API
// is served, it then watches the ServiceCIDR objects and takes its ranges from them.
func (s *APISource) Start(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("watch: APISource started twice")
	}
	sel, err := proxySelector()
	if err != nil {
		close(s.done)
		return err
	}
	served, err := serviceCIDRServed(s.opts.Client.Discovery())
	retryDiscovery := err != nil
	switch {
	case err != nil:
		s.log.Warn("cannot tell whether the ServiceCIDR API is served; learning service CIDRs from default/kubernetes until discovery answers", zap.Error(err))
	case !served:
		s.log.Info("networking.k8s.io/v1 ServiceCIDR is not served; learning service CIDRs from default/kubernetes only")
	default:
		s.store.useServiceCIDRAPI()
	}

	resync := s.opts.ResyncPeriod
	trim := informers.WithTransform(s.trimmer().transform)
	svcTweak := func(o *metav1.ListOptions) {
		o.LabelSelector = sel
		o.FieldSelector = fields.OneTermNotEqualSelector("spec.clusterIP", v1.ClusterIPNone).String()
	}
	mainTweak := func(o *metav1.ListOptions) { o.LabelSelector = sel }
	svcFactory := informers.NewSharedInformerFactoryWithOptions(s.opts.Client, resync, trim, informers.WithTweakListOptions(svcTweak))
	mainFactory := informers.NewSharedInformerFactoryWithOptions(s.opts.Client, resync, trim, informers.WithTweakListOptions(mainTweak))
	// The Service and EndpointSlice informers have no namespace index (the factory's default):
	// nothing looks objects up by namespace, and the index holds every key once more.
	svcInformer := svcFactory.InformerFor(&v1.Service{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return coreinformers.NewFilteredServiceInformer(c, metav1.NamespaceAll, resync, cache.Indexers{}, svcTweak)
	})
	sliceInformer := mainFactory.InformerFor(&discoveryv1.EndpointSlice{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return discoveryinformers.NewFilteredEndpointSliceInformer(c, metav1.NamespaceAll, resync, cache.Indexers{}, mainTweak)
	})
	nodeFactory := informers.NewSharedInformerFactoryWithOptions(s.opts.Client, resync, trim,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", s.opts.NodeName).String()
		}))
	factories := []informers.SharedInformerFactory{svcFactory, mainFactory, nodeFactory}

	var regs []cache.InformerSynced
	add := func(inf cache.SharedIndexInformer, h cache.ResourceEventHandler) error {
		reg, err := inf.AddEventHandler(h)
		if err != nil {
			return fmt.Errorf("registering event handler: %w", err)
		}
		regs = append(regs, reg.HasSynced)
		return nil
	}
	errs := []error{
		add(svcInformer, s.serviceHandler()),
		add(sliceInformer, s.sliceHandler()),
		add(nodeFactory.Core().V1().Nodes().Informer(), s.nodeHandler()),
	}
	if served {
		errs = append(errs, add(mainFactory.Networking().V1().ServiceCIDRs().Informer(), s.serviceCIDRHandler()))
	}
	if err := errors.Join(errs...); err != nil {
		close(s.done)
		return err
	}
	for _, f := range factories {
		f.Start(ctx.Done())
	}
	var retry sync.WaitGroup
	if retryDiscovery {
		retry.Go(func() { s.rediscoverServiceCIDRs(ctx, resync, sel) })
	}
	go func() {
		defer close(s.done)
		if cache.WaitForCacheSync(ctx.Done(), regs...) {
			s.log.Info("watch caches synced")
			s.store.markSynced()
		}
		<-ctx.Done()
		for _, f := range factories {
			f.Shutdown()
		}
		retry.Wait()
	}()
	return nil
}

// rediscoverServiceCIDRs retries ServiceCIDR discovery with backoff until it answers or
// ctx ends. If the API is served, it starts the ServiceCIDR informer and, once it has
// listed the objects, makes them the authority for the service ranges. It returns after
// the informer has stopped.
func (s *APISource) rediscoverServiceCIDRs(ctx context.Context, resync time.Duration, sel string) {
	delay := discoveryRetryFirst
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.opts.RetryClock.After(delay):
		}
		served, err := serviceCIDRServed(s.opts.Client.Discovery())
		if err != nil {
			delay = min(2*delay, discoveryRetryMax)
			s.log.Info("ServiceCIDR discovery failed again; retrying", zap.Duration("in", delay), zap.Error(err))
			continue
		}
		if !served {
			s.log.Info("networking.k8s.io/v1 ServiceCIDR is not served; learning service CIDRs from default/kubernetes only")
			return
		}
		break
	}
	factory := informers.NewSharedInformerFactoryWithOptions(s.opts.Client, resync, informers.WithTransform(s.trimmer().transform),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel }))
	defer factory.Shutdown()
	reg, err := factory.Networking().V1().ServiceCIDRs().Informer().AddEventHandler(s.serviceCIDRHandler())
	if err != nil {
		s.log.Error("cannot watch ServiceCIDRs; learning service CIDRs from default/kubernetes only", zap.Error(err))
		return
	}
	factory.Start(ctx.Done())
	if cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		s.store.useServiceCIDRAPI()
		s.log.Info("networking.k8s.io/v1 ServiceCIDR is served; learning service CIDRs from ServiceCIDR objects")
	}
	<-ctx.Done()
}

// tombstone unwraps the object of a delete event.
func tombstone(obj any) any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

func (s *APISource) unexpected(obj any) {
	s.log.Error("unexpected object type in informer event", zap.String("type", fmt.Sprintf("%T", obj)))
}

func (s *APISource) serviceHandler() cache.ResourceEventHandler {
	return typedHandler(s, s.store.setService, func(svc *v1.Service) { s.store.deleteService(objectKey(svc)) })
}

func (s *APISource) sliceHandler() cache.ResourceEventHandler {
	return typedHandler(s, s.store.setSlice, func(sl *discoveryv1.EndpointSlice) { s.store.deleteSlice(objectKey(sl)) })
}

// typedHandler is an informer's handler for objects of type T: adds and updates go to set,
// deletes (a tombstone unwrapped) to del, and an object of another type is logged.
func typedHandler[T any](s *APISource, set, del func(T)) cache.ResourceEventHandler {
	onSet := func(obj any) {
		if o, ok := obj.(T); ok {
			set(o)
		} else {
			s.unexpected(obj)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    onSet,
		UpdateFunc: func(_, obj any) { onSet(obj) },
		DeleteFunc: func(obj any) {
			if o, ok := tombstone(obj).(T); ok {
				del(o)
			} else {
				s.unexpected(obj)
			}
		},
	}
}

// nodeHandler also checks the name: the field selector is the server's business, and not
// every client (fakes, proxies) honours it.
func (s *APISource) nodeHandler() cache.ResourceEventHandler {
	set := func(obj any) {
		n, ok := obj.(*v1.Node)
		if !ok {
			s.unexpected(obj)
			return
		}
		if n.Name == s.opts.NodeName {
			s.store.setNode(n)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(obj any) {
			n, ok := tombstone(obj).(*v1.Node)
			if !ok {
				s.unexpected(obj)
				return
			}
			if n.Name == s.opts.NodeName {
				s.store.setNode(nil)
			}
		},
	}
}

func (s *APISource) serviceCIDRHandler() cache.ResourceEventHandler {
	set := func(obj any) {
		if c, ok := obj.(*networkingv1.ServiceCIDR); ok {
			s.store.setServiceCIDR(c)
		} else {
			s.unexpected(obj)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(obj any) {
			if c, ok := tombstone(obj).(*networkingv1.ServiceCIDR); ok {
				s.store.deleteServiceCIDR(c.Name)
			} else {
				s.unexpected(obj)
			}
		},
	}
}
