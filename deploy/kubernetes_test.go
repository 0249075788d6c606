package deploy_test

import (
	"bytes"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/asyncstatus/asyncstatus/internal/config"
)

// The subset of the Kubernetes schema the manifests use, field names as the
// API spells them: decoding with KnownFields refuses anything else, so a
// misspelt field (readinesProbe) fails here instead of being dropped by the
// API server.

type objectMeta struct {
	Name   string            `yaml:"name"`
	Labels map[string]string `yaml:"labels"`
}

type typeMeta struct {
	APIVersion string     `yaml:"apiVersion"`
	Kind       string     `yaml:"kind"`
	Metadata   objectMeta `yaml:"metadata"`
}

type labelSelector struct {
	MatchLabels map[string]string `yaml:"matchLabels"`
}

type deployment struct {
	typeMeta `yaml:",inline"`
	Spec     struct {
		Replicas             int           `yaml:"replicas"`
		RevisionHistoryLimit int           `yaml:"revisionHistoryLimit"`
		Selector             labelSelector `yaml:"selector"`
		Strategy             struct {
			Type          string `yaml:"type"`
			RollingUpdate struct {
				MaxSurge       any `yaml:"maxSurge"`
				MaxUnavailable any `yaml:"maxUnavailable"`
			} `yaml:"rollingUpdate"`
		} `yaml:"strategy"`
		Template struct {
			Metadata objectMeta `yaml:"metadata"`
			Spec     podSpec    `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type podSpec struct {
	TerminationGracePeriodSeconds *int  `yaml:"terminationGracePeriodSeconds"`
	AutomountServiceAccountToken  *bool `yaml:"automountServiceAccountToken"`
	EnableServiceLinks            *bool `yaml:"enableServiceLinks"`
	SecurityContext               struct {
		RunAsNonRoot   *bool  `yaml:"runAsNonRoot"`
		RunAsUser      *int64 `yaml:"runAsUser"`
		RunAsGroup     *int64 `yaml:"runAsGroup"`
		SeccompProfile struct {
			Type string `yaml:"type"`
		} `yaml:"seccompProfile"`
	} `yaml:"securityContext"`
	TopologySpreadConstraints []struct {
		MaxSkew           int           `yaml:"maxSkew"`
		TopologyKey       string        `yaml:"topologyKey"`
		WhenUnsatisfiable string        `yaml:"whenUnsatisfiable"`
		LabelSelector     labelSelector `yaml:"labelSelector"`
	} `yaml:"topologySpreadConstraints"`
	Containers []container `yaml:"containers"`
	Volumes    []struct {
		Name      string `yaml:"name"`
		ConfigMap *struct {
			Name string `yaml:"name"`
		} `yaml:"configMap"`
	} `yaml:"volumes"`
}

type container struct {
	Name            string   `yaml:"name"`
	Image           string   `yaml:"image"`
	ImagePullPolicy string   `yaml:"imagePullPolicy"`
	Args            []string `yaml:"args"`
	Ports           []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
		Protocol      string `yaml:"protocol"`
	} `yaml:"ports"`
	Env []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			SecretKeyRef *struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			} `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	Lifecycle      struct {
		PreStop *struct {
			Sleep *struct {
				Seconds int `yaml:"seconds"`
			} `yaml:"sleep"`
		} `yaml:"preStop"`
	} `yaml:"lifecycle"`
	Resources struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	SecurityContext struct {
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
		RunAsNonRoot             *bool `yaml:"runAsNonRoot"`
		Privileged               *bool `yaml:"privileged"`
		Capabilities             struct {
			Drop []string `yaml:"drop"`
		} `yaml:"capabilities"`
	} `yaml:"securityContext"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		ReadOnly  bool   `yaml:"readOnly"`
	} `yaml:"volumeMounts"`
}

type probe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port any    `yaml:"port"` // a number or a container port's name
	} `yaml:"httpGet"`
	PeriodSeconds    int `yaml:"periodSeconds"`
	TimeoutSeconds   int `yaml:"timeoutSeconds"`
	FailureThreshold int `yaml:"failureThreshold"`
}

type service struct {
	typeMeta `yaml:",inline"`
	Spec     struct {
		Type     string            `yaml:"type"`
		Selector map[string]string `yaml:"selector"`
		Ports    []struct {
			Name       string `yaml:"name"`
			Port       int    `yaml:"port"`
			TargetPort any    `yaml:"targetPort"`
			Protocol   string `yaml:"protocol"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

type podDisruptionBudget struct {
	typeMeta `yaml:",inline"`
	Spec     struct {
		MinAvailable   any           `yaml:"minAvailable"`
		MaxUnavailable any           `yaml:"maxUnavailable"`
		Selector       labelSelector `yaml:"selector"`
	} `yaml:"spec"`
}

type configMap struct {
	typeMeta `yaml:",inline"`
	Data     map[string]string `yaml:"data"`
}

type secret struct {
	typeMeta   `yaml:",inline"`
	Type       string            `yaml:"type"`
	StringData map[string]string `yaml:"stringData"`
}

type kustomization struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Labels     []struct {
		Pairs map[string]string `yaml:"pairs"`
	} `yaml:"labels"`
	Resources []string `yaml:"resources"`
}

// manifests is every object of deploy/kubernetes, decoded by kind.
type manifests struct {
	deployment    deployment
	service       service
	pdb           podDisruptionBudget
	configMap     configMap
	secret        secret // secret.example.yaml
	kustomization kustomization
}

func readManifests(t *testing.T) manifests {
	t.Helper()
	files, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in deploy/kubernetes: %v", err)
	}
	var m manifests
	seen := map[string]string{} // kind -> file
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, h := range decodeHeaders(t, f, data) {
			if h.APIVersion == "" || h.Kind == "" {
				t.Fatalf("%s, document %d: apiVersion and kind are required", f, i+1)
			}
			if h.Kind != "Kustomization" && h.Metadata.Name == "" {
				t.Fatalf("%s, document %d (%s): metadata.name is required", f, i+1, h.Kind)
			}
			if other, dup := seen[h.Kind]; dup {
				t.Fatalf("%s: a second %s (the first is in %s); this test expects one of each", f, h.Kind, other)
			}
			seen[h.Kind] = f
			want := map[string]string{
				"Deployment": "apps/v1", "Service": "v1", "PodDisruptionBudget": "policy/v1",
				"ConfigMap": "v1", "Secret": "v1", "Kustomization": "kustomize.config.k8s.io/v1beta1",
			}[h.Kind]
			if want == "" {
				t.Fatalf("%s: kind %s is not one this test knows; teach it", f, h.Kind)
			}
			if h.APIVersion != want {
				t.Fatalf("%s: %s has apiVersion %s, want %s", f, h.Kind, h.APIVersion, want)
			}
			switch h.Kind {
			case "Deployment":
				m.deployment = decodeStrict[deployment](t, f, data)[0]
			case "Service":
				m.service = decodeStrict[service](t, f, data)[0]
			case "PodDisruptionBudget":
				m.pdb = decodeStrict[podDisruptionBudget](t, f, data)[0]
			case "ConfigMap":
				m.configMap = decodeStrict[configMap](t, f, data)[0]
			case "Secret":
				m.secret = decodeStrict[secret](t, f, data)[0]
			case "Kustomization":
				m.kustomization = decodeStrict[kustomization](t, f, data)[0]
			}
		}
	}
	for _, k := range []string{"Deployment", "Service", "PodDisruptionBudget", "ConfigMap", "Secret", "Kustomization"} {
		if seen[k] == "" {
			t.Fatalf("deploy/kubernetes has no %s", k)
		}
	}
	// apply -k applies what the kustomization lists: every manifest but the
	// Secret's example, whose values are the user's.
	var want []string
	for _, f := range files {
		if b := filepath.Base(f); b != "kustomization.yaml" && b != "secret.example.yaml" {
			want = append(want, b)
		}
	}
	got := slices.Sorted(slices.Values(m.kustomization.Resources))
	if !slices.Equal(got, want) {
		t.Fatalf("kustomization.yaml resources %q, want %q", got, want)
	}
	return m
}

// decodeHeaders reads apiVersion, kind and metadata of every document of
// data, whatever its kind.
func decodeHeaders(t *testing.T, path string, data []byte) []typeMeta {
	t.Helper()
	var out []typeMeta
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var v typeMeta
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, v)
	}
}

func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// TestKubernetes checks the manifests against the service and against what
// the issue asks of a production starting point.
func TestKubernetes(t *testing.T) {
	m := readManifests(t)
	routes := getRoutes(t)
	img := readContainerfile(t)
	d := m.deployment
	pod := d.Spec.Template.Spec
	podLabels := d.Spec.Template.Metadata.Labels

	// The fields the API server requires of each object.
	if !selects(d.Spec.Selector.MatchLabels, podLabels) {
		t.Fatalf("Deployment: selector %v does not select its own pod labels %v", d.Spec.Selector.MatchLabels, podLabels)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("Deployment: %d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Name == "" || c.Image == "" {
		t.Fatalf("Deployment: container name %q, image %q: both are required", c.Name, c.Image)
	}
	if !selects(m.service.Spec.Selector, podLabels) {
		t.Fatalf("Service: selector %v does not select the Deployment's pods %v", m.service.Spec.Selector, podLabels)
	}
	if !selects(m.pdb.Spec.Selector.MatchLabels, podLabels) {
		t.Fatalf("PodDisruptionBudget: selector %v does not select the Deployment's pods", m.pdb.Spec.Selector.MatchLabels)
	}
	if (m.pdb.Spec.MinAvailable == nil) == (m.pdb.Spec.MaxUnavailable == nil) {
		t.Fatalf("PodDisruptionBudget: set exactly one of minAvailable and maxUnavailable")
	}
	if len(m.configMap.Data) == 0 || len(m.secret.StringData) == 0 {
		t.Fatalf("ConfigMap data and Secret stringData must not be empty")
	}

	// The configuration the pods run with: the ConfigMap's file, mounted
	// where --config says, under the Deployment's environment with the
	// Secret's (example) values.
	var mountPath string
	for _, v := range pod.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == m.configMap.Metadata.Name {
			for _, vm := range c.VolumeMounts {
				if vm.Name == v.Name {
					mountPath = vm.MountPath
					if !vm.ReadOnly {
						t.Errorf("Deployment: the config volume is mounted writable")
					}
				}
			}
		}
	}
	if mountPath == "" {
		t.Fatalf("Deployment: the ConfigMap %s is not mounted into the container", m.configMap.Metadata.Name)
	}
	i := slices.Index(c.Args, "--config")
	if i < 0 || i+1 >= len(c.Args) {
		t.Fatalf("Deployment: args %q do not pass --config", c.Args)
	}
	if c.Args[0] != "serve" {
		t.Fatalf("Deployment: args %q, want serve first (the image's entrypoint is the binary)", c.Args)
	}
	cfgFile, ok := strings.CutPrefix(c.Args[i+1], strings.TrimSuffix(mountPath, "/")+"/")
	if !ok || m.configMap.Data[cfgFile] == "" {
		t.Fatalf("Deployment: --config %s is not a key of the ConfigMap mounted at %s (keys: %v)",
			c.Args[i+1], mountPath, slices.Collect(maps.Keys(m.configMap.Data)))
	}
	env := map[string]string{}
	var names []string
	fromSecret := map[string]bool{}
	for _, e := range c.Env {
		names = append(names, e.Name)
		switch {
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			if ref.Name != m.secret.Metadata.Name {
				t.Errorf("Deployment: %s comes from Secret %q; the example Secret is %q", e.Name, ref.Name, m.secret.Metadata.Name)
			}
			v, ok := m.secret.StringData[ref.Key]
			if !ok {
				t.Errorf("Deployment: %s comes from key %q, which secret.example.yaml does not have", e.Name, ref.Key)
			}
			env[e.Name] = v
			fromSecret[e.Name] = true
		case e.ValueFrom != nil:
			t.Errorf("Deployment: %s: valueFrom other than secretKeyRef is not checked here; teach the test", e.Name)
		default:
			env[e.Name] = e.Value
		}
	}
	checkEnvNames(t, "Deployment env", names)
	for _, k := range []string{"auth.poll_token_secret", "webhooks.secret_key", "redis.url"} {
		if n := config.EnvName(k); !fromSecret[n] {
			t.Errorf("Deployment: %s (%s) must come from the Secret", n, k)
		}
	}
	cfg := effectiveConfig(t, "ConfigMap + Secret", m.configMap.Data[cfgFile], env)

	// Probes: readiness on /readyz, liveness on the liveness route, both on
	// the port serve listens on.
	httpPort := port(t, cfg.HTTP.Addr)
	portNames := map[string]int{}
	for _, p := range c.Ports {
		portNames[p.Name] = p.ContainerPort
	}
	if strconv.Itoa(portNames["http"]) != httpPort {
		t.Fatalf("Deployment: containerPort http = %d, but serve listens on %s (http.addr %q)", portNames["http"], httpPort, cfg.HTTP.Addr)
	}
	resolve := func(what string, p any) string {
		switch v := p.(type) {
		case int:
			return strconv.Itoa(v)
		case string:
			if n, ok := portNames[v]; ok {
				return strconv.Itoa(n)
			}
		}
		t.Fatalf("%s: port %v names no container port", what, p)
		return ""
	}
	for _, pr := range []struct {
		name string
		p    *probe
		path string
	}{{"readinessProbe", c.ReadinessProbe, "/readyz"}, {"livenessProbe", c.LivenessProbe, livenessPath(routes)}} {
		if pr.p == nil || pr.p.HTTPGet == nil {
			t.Fatalf("Deployment: no %s with httpGet", pr.name)
		}
		if pr.p.HTTPGet.Path != pr.path || !routes[pr.p.HTTPGet.Path] {
			t.Errorf("Deployment: %s GET %s, want %s (a route of the API)", pr.name, pr.p.HTTPGet.Path, pr.path)
		}
		if got := resolve(pr.name, pr.p.HTTPGet.Port); got != httpPort {
			t.Errorf("Deployment: %s on port %s, serve listens on %s", pr.name, got, httpPort)
		}
	}
	if tp := resolve("Service targetPort", m.service.Spec.Ports[0].TargetPort); tp != httpPort {
		t.Errorf("Service: targetPort is %s, serve listens on %s", tp, httpPort)
	}

	// What the issue asks of a production starting point.
	if d.Spec.Replicas < 2 {
		t.Errorf("Deployment: %d replicas, want at least 2", d.Spec.Replicas)
	}
	if c.Resources.Requests["cpu"] == "" || c.Resources.Requests["memory"] == "" || c.Resources.Limits["memory"] == "" {
		t.Errorf("Deployment: resources %+v: want cpu and memory requests and a memory limit", c.Resources)
	}
	sc, psc := c.SecurityContext, pod.SecurityContext
	isTrue := func(b *bool) bool { return b != nil && *b }
	if !isTrue(psc.RunAsNonRoot) || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("Deployment: pod securityContext must run as a non-root user")
	}
	if uid, _, _ := strings.Cut(img.user, ":"); psc.RunAsUser != nil && strconv.FormatInt(*psc.RunAsUser, 10) != uid {
		t.Errorf("Deployment: runAsUser %d, the image's USER is %s", *psc.RunAsUser, img.user)
	}
	if !isTrue(sc.ReadOnlyRootFilesystem) || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		!slices.Contains(sc.Capabilities.Drop, "ALL") || isTrue(sc.Privileged) {
		t.Errorf("Deployment: container securityContext must have readOnlyRootFilesystem, no privilege escalation, drop ALL capabilities")
	}
	if c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil || c.Lifecycle.PreStop.Sleep.Seconds <= 0 {
		t.Fatalf("Deployment: want a preStop sleep (endpoints are removed while the pod still serves)")
	}
	pause := c.Lifecycle.PreStop.Sleep.Seconds
	if g := pod.TerminationGracePeriodSeconds; g == nil || float64(*g) <= float64(pause)+cfg.HTTP.ShutdownTimeout.Seconds() {
		t.Errorf("Deployment: terminationGracePeriodSeconds must exceed the preStop pause (%ds) + http.shutdown_timeout (%s)", pause, cfg.HTTP.ShutdownTimeout)
	}
}
