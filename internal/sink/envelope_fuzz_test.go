package sink

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzDecodeEnvelope decodes any message body both ways: DecodeEnvelope fails exactly when
// json.Unmarshal does, and otherwise yields the same Envelope, whether or not the body was in
// the sinks' form.
func FuzzDecodeEnvelope(f *testing.F) {
	for _, data := range sinkEnvelopes(f) {
		f.Add(data)
	}
	f.Add([]byte(`{"provider":"stripe","id":"evt_1","signed":[],"unsigned":null,"payload":{"a":[1,2.5e-3,"\u00e9\n"]},"payload_ref":null}`))
	f.Add([]byte(`{"provider":"s","id":"i","payload":null,"payload_ref":{"bucket":"b","key":"k","bytes":-0,"sha256":"x"}}`))
	f.Add([]byte(`{"provider":"s","provider":"t","PAYLOAD":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		want, wantErr := unmarshalled(data)
		if got, ok := decodeCompact(data); ok && (wantErr != nil || !reflect.DeepEqual(got, want)) {
			t.Fatalf("read in one pass as %+v; json.Unmarshal: %+v, %v", got, want, wantErr)
		}
		got, sinkForm, err := ReadEnvelope(data)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("error %v, json.Unmarshal's %v", err, wantErr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("decoded %+v, json.Unmarshal %+v", got, want)
		}
		if sinkForm {
			checkMembersByName(t, data, got)
		}
	})
}

// checkMembersByName checks that data's members "provider", "id" and "payload", selected by
// their exact names, are e's Provider, ID and Payload (nil when absent).
func checkMembersByName(t *testing.T, data []byte, e Envelope) {
	t.Helper()
	var members map[string]json.RawMessage
	if err := json.Unmarshal(data, &members); err != nil {
		t.Fatal(err)
	}
	var provider, id string
	if p, ok := members["provider"]; ok && json.Unmarshal(p, &provider) != nil || provider != e.Provider {
		t.Fatalf("provider %s, decoded %q", p, e.Provider)
	}
	if i, ok := members["id"]; ok && json.Unmarshal(i, &id) != nil || id != e.ID {
		t.Fatalf("id %s, decoded %q", i, e.ID)
	}
	if p, ok := members["payload"]; ok != (e.Payload != nil) || !bytes.Equal(p, e.Payload) {
		t.Fatalf("payload %s, decoded %s", p, e.Payload)
	}
}
