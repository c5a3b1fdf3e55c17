package events

// DecodeLean and DecodeSDK expose Decode's two paths to the tests, which
// check that they agree.
func DecodeLean(subject string, header map[string][]string, data []byte) (*Event, bool, error) {
	addr, err := ParseSubject(subject)
	if err != nil {
		return nil, false, err
	}
	out, p, ok := decodeBinaryLean(addr, header, data)
	if !ok {
		return nil, false, nil
	}
	ev, err := finishDecode(addr, out, p)
	return ev, true, err
}

func DecodeSDK(subject string, header map[string][]string, data []byte) (*Event, error) {
	addr, err := ParseSubject(subject)
	if err != nil {
		return nil, err
	}
	return decodeSDK(subject, addr, header, data)
}

var (
	ValidID   = validID
	IDPattern = idPattern
)
