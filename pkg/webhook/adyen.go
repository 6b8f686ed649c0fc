package webhook

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/idemlambda/idem/internal/preset"
)

// Adyen's standard (payments) webhooks put their events in one body,
//
//	{"live": "false", "notificationItems": [{"NotificationRequestItem": {...}}, ...]}
//
// and sign each item on its own: the base64 HMAC-SHA256, under the hex-decoded
// HMAC key, of eight of its fields joined with ":" (itemSignedFields), in
// its additionalData.hmacSignature. Everything else in an item (reason,
// paymentMethod, eventDate, the rest of additionalData) is unsigned. The
// receiver answers "[accepted]" once it has every item.
// Sources: https://docs.adyen.com/development-resources/webhooks/verify-hmac-signatures
// and the Adyen API libraries (adyen-go-api-library src/hmacvalidator/hmacvalidator.go,
// GetDataToSign; @adyen/api-library src/utils/hmacValidator.ts, getDataToSign).

// maxNotificationItems bounds the items of one delivery: each is a key
// claimed in Redis. Adyen sends one item per delivery today.
const maxNotificationItems = 100

// itemsAnswer is the body Adyen expects once a delivery is accepted.
const itemsAnswer = "[accepted]"

// The signed fields of an item, in the order they are joined.
const (
	itemPSPReference = iota
	itemOriginalReference
	itemMerchantAccount
	itemMerchantReference
	itemValue
	itemCurrency
	itemEventCode
	itemSuccess
	numItemFields
)

// notificationItem is one verified-to-be item of a delivery: the object as
// sent, its signed fields and its signature.
type notificationItem struct {
	raw       json.RawMessage
	fields    [numItemFields]string
	signature []byte
}

// signedData is what the item's HMAC covers.
func (it notificationItem) signedData() []byte {
	return []byte(strings.Join(it.fields[:], ":"))
}

// validateItems reports a FamilyItemHMAC preset this file cannot verify.
func validateItems(p preset.Preset) error {
	if p.Algorithm != preset.SHA256 || p.Encoding != preset.Base64 {
		return errors.New("an item HMAC is a base64 HMAC-SHA256")
	}
	if p.SignatureField != "additionalData.hmacSignature" {
		return errors.New("an item HMAC is read from additionalData.hmacSignature")
	}
	return nil
}

// addItemKey adds an HMAC key written in hex, as Adyen shows it.
func (v *Verifier) addItemKey(secret string) error {
	key, err := hex.DecodeString(secret)
	if err != nil {
		return fmt.Errorf("%w: the HMAC key is not hex", ErrInvalidSecret)
	}
	v.keys = append(v.keys, key)
	return nil
}

// matchItem returns the index of the key whose HMAC is the item's signature, or -1.
func (v *Verifier) matchItem(it notificationItem) int {
	data := it.signedData()
	for i, key := range v.keys {
		if hmac.Equal(mac(preset.SHA256, key, data), it.signature) {
			return i
		}
	}
	return -1
}

// verifyItemsDelivery is Verify for a body of items: the body parsed once,
// every item verified (one that matches no secret refuses the whole
// delivery, before anything of it is used), then one Delivery per item.
func (v *Verifier) verifyItemsDelivery(r Request) (Delivery, error) {
	items, err := parseNotificationItems(r.Body)
	if err != nil {
		if !isSignatureError(err) {
			err = fmt.Errorf("%w: %w", ErrNoValidSignature, err)
		}
		return Delivery{}, err
	}
	if _, err := v.matchItems(items); err != nil {
		return Delivery{}, err
	}
	return itemsDelivery(items)
}

// verifyItems is the signature half of verifyItemsDelivery.
func (v *Verifier) verifyItems(r Request) (int, error) {
	items, err := parseNotificationItems(r.Body)
	if err != nil {
		return -1, err
	}
	return v.matchItems(items)
}

// matchItems checks every item's signature; it returns the index of the
// secret that verified the first one.
func (v *Verifier) matchItems(items []notificationItem) (int, error) {
	first := -1
	for n, it := range items {
		k := v.matchItem(it)
		if k < 0 {
			return -1, fmt.Errorf("%w: notification item %d of %d matches none of %d secret(s)", ErrNoValidSignature, n+1, len(items), len(v.keys))
		}
		if first < 0 {
			first = k
		}
	}
	return first, nil
}

// itemsDelivery returns one Delivery per item: key pspReference and
// eventCode joined with "|" (Adyen's own rule for a duplicate: the same
// pspReference and eventCode), type the eventCode, object the payment
// (originalReference for a modification, else pspReference), payload the
// item's object, and a fingerprint over the signed fields, so that a retry
// is a replay and an item whose signed fields changed under the same key (a
// success flipped) is a reused id. The payload is reported unsigned: the
// HMAC covers eight of its fields, not the object.
func itemsDelivery(items []notificationItem) (Delivery, error) {
	d := Delivery{Answer: &Handshake{ContentType: "text/plain", Body: []byte(itemsAnswer)}}
	for n, it := range items {
		psp, code := it.fields[itemPSPReference], it.fields[itemEventCode]
		if psp == "" || code == "" {
			return Delivery{}, fmt.Errorf("%w: notification item %d has no pspReference or no eventCode", ErrNoEventID, n+1)
		}
		if strings.Contains(code, "|") {
			// The key splits at its last "|": an event code never holds one.
			return Delivery{}, fmt.Errorf("%w: notification item %d: eventCode %s holds a |", ErrBadPayload, n+1, quote(code))
		}
		object := it.fields[itemOriginalReference]
		if object == "" {
			object = psp
		}
		d.Items = append(d.Items, Delivery{
			ID:          psp + "|" + code,
			Type:        code,
			ObjectID:    object,
			Unsigned:    []string{"payload"},
			Payload:     it.raw,
			Fingerprint: sha256.Sum256(it.signedData()),
		})
	}
	return d, nil
}

// parseNotificationItems reads the items of an Adyen body. A body that is not
// the object Adyen sends, an item without its signature, a member named twice
// on the way to a signed field (parsers disagree on which one counts), a
// signed field of the wrong type, or more than maxNotificationItems items is
// an error wrapping ErrBadPayload or ErrNotSigned.
func parseNotificationItems(body []byte) ([]notificationItem, error) {
	top, err := uniqueObject(body, "the body")
	if err != nil {
		return nil, err
	}
	rawList, ok := top["notificationItems"]
	if !ok {
		return nil, fmt.Errorf("%w: no notificationItems", ErrBadPayload)
	}
	var list []json.RawMessage
	if err := json.Unmarshal(rawList, &list); err != nil || bytes.TrimSpace(rawList)[0] != '[' {
		return nil, fmt.Errorf("%w: notificationItems is not an array", ErrBadPayload)
	}
	switch {
	case len(list) == 0:
		return nil, fmt.Errorf("%w: notificationItems is empty", ErrBadPayload)
	case len(list) > maxNotificationItems:
		return nil, fmt.Errorf("%w: %d notification items, more than %d", ErrBadPayload, len(list), maxNotificationItems)
	}
	items := make([]notificationItem, 0, len(list))
	for n, entry := range list {
		it, err := parseNotificationItem(entry)
		if err != nil {
			return nil, fmt.Errorf("notification item %d: %w", n+1, err)
		}
		items = append(items, it)
	}
	return items, nil
}

// parseNotificationItem reads one {"NotificationRequestItem": {...}} entry.
func parseNotificationItem(entry json.RawMessage) (notificationItem, error) {
	wrapper, err := uniqueObject(entry, "the entry")
	if err != nil {
		return notificationItem{}, err
	}
	raw, ok := wrapper["NotificationRequestItem"]
	if !ok {
		return notificationItem{}, fmt.Errorf("%w: no NotificationRequestItem", ErrBadPayload)
	}
	obj, err := uniqueObject(raw, "NotificationRequestItem")
	if err != nil {
		return notificationItem{}, err
	}
	it := notificationItem{raw: raw}
	for i, name := range [...]string{
		itemPSPReference:      "pspReference",
		itemOriginalReference: "originalReference",
		itemMerchantAccount:   "merchantAccountCode",
		itemMerchantReference: "merchantReference",
		itemEventCode:         "eventCode",
		itemSuccess:           "success",
	} {
		if name == "" {
			continue
		}
		if it.fields[i], err = itemString(obj[name], name); err != nil {
			return notificationItem{}, err
		}
	}
	if it.fields[itemValue], it.fields[itemCurrency], err = itemAmount(obj); err != nil {
		return notificationItem{}, err
	}
	if it.signature, err = itemSignature(obj); err != nil {
		return notificationItem{}, err
	}
	return it, nil
}

// itemAmount reads amount.value and amount.currency.
func itemAmount(obj map[string]json.RawMessage) (value, currency string, err error) {
	rawAmount, ok := obj["amount"]
	if !ok {
		// The SDKs disagree here (Go signs "0", Node throws): refuse.
		return "", "", fmt.Errorf("%w: no amount", ErrBadPayload)
	}
	amount, err := uniqueObject(rawAmount, "amount")
	if err != nil {
		return "", "", err
	}
	if value, err = itemInteger(amount["value"]); err != nil {
		return "", "", err
	}
	currency, err = itemString(amount["currency"], "amount.currency")
	return value, currency, err
}

// itemSignature reads additionalData.hmacSignature, a base64 HMAC-SHA256.
func itemSignature(obj map[string]json.RawMessage) ([]byte, error) {
	rawExtra, ok := obj["additionalData"]
	if !ok {
		return nil, fmt.Errorf("%w: no additionalData.hmacSignature", ErrNotSigned)
	}
	extra, err := uniqueObject(rawExtra, "additionalData")
	if err != nil {
		return nil, err
	}
	encoded, err := itemString(extra["hmacSignature"], "additionalData.hmacSignature")
	if err != nil {
		return nil, err
	}
	if encoded == "" {
		return nil, fmt.Errorf("%w: no additionalData.hmacSignature", ErrNotSigned)
	}
	sig, ok := decodeSignature(encoded, preset.Base64, sha256.Size)
	if !ok {
		return nil, fmt.Errorf("%w: additionalData.hmacSignature is not a base64 HMAC-SHA256", ErrInvalidHeader)
	}
	return sig, nil
}

// uniqueObject decodes a JSON object whose every member has its own name (as
// parsers see names: "id" and "\u0069d" are one), in one pass.
func uniqueObject(raw []byte, what string) (map[string]json.RawMessage, error) {
	bad := func(err error) error { return fmt.Errorf("%w: %s: %s", ErrBadPayload, what, quote(err.Error())) }
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("%w: %s is not a JSON object", ErrBadPayload, what)
	}
	obj := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, bad(err)
		}
		name, _ := tok.(string)
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, bad(err)
		}
		if _, dup := obj[name]; dup {
			return nil, fmt.Errorf("%w: %s names a member more than once", ErrBadPayload, what)
		}
		obj[name] = val
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, bad(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: %s is followed by more data", ErrBadPayload, what)
	}
	return obj, nil
}

// itemString reads a signed string field: absent or null is "", as both
// SDKs sign it; another type than a string, or a string that is not valid
// UTF-8, is ErrBadPayload.
func itemString(raw json.RawMessage, name string) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] != '"' {
		return "", fmt.Errorf("%w: %s is not a string", ErrBadPayload, name)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("%w: %s: %s", ErrBadPayload, name, quote(err.Error()))
	}
	if !utf8.Valid(raw) || strings.ContainsRune(s, utf8.RuneError) {
		return "", fmt.Errorf("%w: %s is not valid UTF-8", ErrBadPayload, name)
	}
	return s, nil
}

// itemInteger reads amount.value, an integer in minor units, as its
// digits. Only a plain integer passes: "1e3" or "1000.0" would be signed as
// "1000" by one SDK and differently by another.
func itemInteger(raw json.RawMessage) (string, error) {
	s := string(bytes.TrimSpace(raw))
	digits := strings.TrimPrefix(s, "-")
	if !isDecimal(digits) {
		return "", fmt.Errorf("%w: amount.value is not an integer", ErrBadPayload)
	}
	if digits == "0" {
		return "0", nil
	}
	return s, nil
}
