// Package deploy holds the files a user copies to run asyncstatus: Kubernetes
// manifests (kubernetes/), a Compose file (compose/) and a systemd unit
// (systemd/); docs/deploy.md explains them. It has no code. Its tests check
// the files against the service they deploy: configuration keys and
// variables, probe paths and ports, the image's user and entrypoint
// (deploy_test.go); and, behind the imagetest build tag (make image-test),
// the image itself and the reproducibility of release builds (image_test.go).
package deploy
