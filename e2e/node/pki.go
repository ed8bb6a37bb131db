package node

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// PKI is the cluster's certificate authority and the files issued from it, all in Dir:
// ca.crt/ca.key, and NAME.crt/NAME.key for each certificate Issue wrote.
type PKI struct {
	Dir    string
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
}

// NewPKI creates a CA (ECDSA P-256, valid a day: the cluster lives for one run) in dir.
func NewPKI(dir string) (*PKI, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kipvs-e2e-node-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("pki: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	p := &PKI{Dir: dir, caCert: cert, caKey: key}
	if err := p.write("ca", der, key); err != nil {
		return nil, err
	}
	return p, nil
}

// CertSpec is one certificate to issue.
type CertSpec struct {
	Name   string // file base name
	CN     string
	Orgs   []string
	Client bool // client authentication
	Server bool // server authentication, for DNS and IPs
	DNS    []string
	IPs    []net.IP
}

// Issue writes NAME.crt and NAME.key signed by the CA.
func (p *PKI) Issue(s CertSpec) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("pki: %s key: %w", s.Name, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: s.CN, Organization: s.Orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		DNSNames:     s.DNS,
		IPAddresses:  s.IPs,
	}
	if s.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	if s.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		return fmt.Errorf("pki: %s certificate: %w", s.Name, err)
	}
	return p.write(s.Name, der, key)
}

// Cert and Key are the paths of NAME's files.
func (p *PKI) Cert(name string) string { return filepath.Join(p.Dir, name+".crt") }

// Key is the path of NAME's private key.
func (p *PKI) Key(name string) string { return filepath.Join(p.Dir, name+".key") }

func (p *PKI) write(name string, der []byte, key *ecdsa.PrivateKey) error {
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(p.Cert(name), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return err
	}
	// Readable by all: the VM reads the kubelet's key over its read-only view of the host.
	return os.WriteFile(p.Key(name), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o644)
}

// WriteServiceAccountKey writes the RSA key that signs ServiceAccount tokens (the apiserver
// verifies, kube-controller-manager signs) as sa.key.
func (p *PKI) WriteServiceAccountKey() (string, error) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", fmt.Errorf("pki: service account key: %w", err)
	}
	path := filepath.Join(p.Dir, "sa.key")
	b := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
	return path, os.WriteFile(path, b, 0o600)
}

// Kubeconfig renders a kubeconfig for server that verifies it with the CA and authenticates
// with NAME's client certificate (file paths, so it works on the host and in the VM alike).
func (p *PKI) Kubeconfig(server, name string) []byte {
	return []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: node-e2e
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: %s
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: node-e2e
  context:
    cluster: node-e2e
    user: %s
current-context: node-e2e
`, server, p.Cert("ca"), name, p.Cert(name), p.Key(name), name))
}
