// Regenerates the vectors of twilio_sharedkey.json and adyen_items.json with the
// providers' own SDKs: twilio@6.3.1 (lib/webhooks/webhooks.js:
// getExpectedTwilioSignature, validateRequest, getSignatureAlgorithm) and
// @adyen/api-library@32.1.0 (lib/src/utils/hmacValidator.js: HmacValidator).
//
//   npm install twilio@6.3.1 @adyen/api-library@32.1.0
//   node generate.js
const fs = require("fs");
const twilio = require("twilio");
const { hmacValidator } = require("@adyen/api-library");

// Twilio: a SharedKey secret, a form webhook and a JSON one (bodySHA256).
const sharedKey = "sk_test_0123456789abcdef0123456789abcdef";
const authToken = "12345";
const formURL = "https://mycompany.com/myapp.php?foo=1&bar=2";
const params = { CallSid: "CA1234567890ABCDE", Caller: "+12349013030", Digits: "1234", From: "+12349013030", To: "+18005551212" };
const jsonBody = '{"CallSid":"CA1234567890ABCDE","Caller":"+12349013030"}';
const bodyHash = require("crypto").createHash("sha256").update(jsonBody).digest("hex");
const jsonURL = "https://mycompany.com/myapp.php?bodySHA256=" + bodyHash;
const settings = "key=webhooks_sharedkey_01hzy0000000000000000000,algorithm=HMAC_SHA256";
const algorithm = twilio.getSignatureAlgorithm(settings);
const form = new URLSearchParams(params).toString();
const twilioVectors = {
  sharedKey, authToken, settings, algorithm,
  form: { url: formURL, body: form, signature: twilio.getExpectedTwilioSignature(sharedKey, formURL, params, algorithm) },
  json: { url: jsonURL, body: jsonBody, signature: twilio.getExpectedTwilioSignature(sharedKey, jsonURL, {}, algorithm) },
  sha1: { url: formURL, body: form, signature: twilio.getExpectedTwilioSignature(authToken, formURL, params) },
};
// The SDK accepts what it signed, and refuses it without the settings' algorithm.
if (!twilio.validateRequest(sharedKey, twilioVectors.form.signature, formURL, params, algorithm) ||
    twilio.validateRequest(sharedKey, twilioVectors.form.signature, formURL, params) ||
    !twilio.validateRequestWithBody(sharedKey, twilioVectors.json.signature, jsonURL, jsonBody, algorithm)) {
  throw new Error("twilio-node does not validate its own SharedKey signatures");
}
fs.writeFileSync("twilio_sharedkey.json", JSON.stringify(twilioVectors, null, 2) + "\n");

// Adyen: the test item of adyen-go-api-library src/hmacvalidator/hmacvalidator_test.go,
// and a second item (a CAPTURE of it), in one notification, each signed by the SDK.
const key = "DFB1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00";
const items = [
  { additionalData: {}, amount: { currency: "EUR", value: 1000 }, eventCode: "EVENT", eventDate: "1970-01-01T00:00:00Z",
    merchantAccountCode: "merchantAccount", merchantReference: "reference", originalReference: "originalReference",
    paymentMethod: "VISA", pspReference: "pspReference", reason: "reason", success: "true" },
  { additionalData: { authCode: "1234" }, amount: { currency: "EUR", value: 1000 }, eventCode: "CAPTURE", eventDate: "2026-01-19T16:42:03+01:00",
    merchantAccountCode: "merchantAccount", merchantReference: "reference",
    paymentMethod: "visa", pspReference: "QFQTPCQ8HXSKGK82", reason: "", success: "true", originalReference: "pspReference" },
];
const v = new hmacValidator();
for (const item of items) {
  item.additionalData.hmacSignature = v.calculateHmac(item, key);
  if (!v.validateHMAC(item, key)) throw new Error("adyen: the SDK refuses its own signature");
}
const notification = { live: "false", notificationItems: items.map((i) => ({ NotificationRequestItem: i })) };
fs.writeFileSync("adyen_items.json", JSON.stringify(notification, null, 2) + "\n");
console.log("ok", items.map((i) => i.additionalData.hmacSignature));
