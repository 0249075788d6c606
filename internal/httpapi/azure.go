package httpapi

import "github.com/gofiber/fiber/v2"

// The Azure status monitor (docs/reference.md §15): GET /v1/requests/{id}/operation,
// which the create answer's Operation-Location names. It is a poll of the
// request (pollAs) in Microsoft's words, so that the Azure SDK pollers, which
// know only Succeeded, Failed and Canceled as ends, stop on every terminal
// status: expired reads Failed, cancelled Canceled.

// monitorSuffix turns a request's URL into its status monitor's.
const monitorSuffix = "/operation"

// monitor answers GET /v1/requests/{id}/operation.
func (s *Server) monitor(c *fiber.Ctx) error { return s.pollAs(c, viewMonitor) }
