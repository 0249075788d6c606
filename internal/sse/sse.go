// Package sse writes the fields of Server-Sent Events (HTML Living Standard,
// "Server-sent events", §9.2.5) so that no value can start a field of its own.
// An event stream ends a line at CR, LF or CRLF alike, so a value holding any
// of them, written after "data: " as it is, would let whoever wrote the value
// (a tenant's progress message, a stored result) add fields of their choosing
// — another event, an id, a retry of a day. It imports nothing of this module.
package sse

// AppendData appends data to dst as one event's data field: a "data: " line
// for each line of data, split at CR, LF and CRLF, which the reader joins back
// with LF. Nothing in data can end the event or start another field.
func AppendData(dst, data []byte) []byte { return appendData(dst, data) }

// AppendDataString is AppendData for a string.
func AppendDataString(dst []byte, data string) []byte { return appendData(dst, data) }

func appendData[T ~string | ~[]byte](dst []byte, data T) []byte {
	for {
		i := indexLineEnd(data)
		if i < 0 {
			dst = append(dst, "data: "...)
			dst = append(dst, data...)
			return append(dst, '\n')
		}
		dst = append(dst, "data: "...)
		dst = append(dst, data[:i]...)
		dst = append(dst, '\n')
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
}

func indexLineEnd[T ~string | ~[]byte](s T) int {
	for i := 0; i < len(s); i++ {
		if s[i] == '\r' || s[i] == '\n' {
			return i
		}
	}
	return -1
}
