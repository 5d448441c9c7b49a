// The prompt channel of `espvpn --prompt-fd N`: how a program (nm-espvpn-auth-dialog's
// login window) answers espvpn's login prompts. Sans-IO: records to and from lines.
//
// espvpn writes one record per line, fields separated by a TAB, each field escaped
// (backslash as \\, TAB \t, LF \n, CR \r, other control characters and DEL as \xHH,
// so a record is one line and carries no raw server byte below 0x20):
//   ask     FORM NAME KIND LABEL [CHOICE...]   a field; KIND text|password|select; a select's
//                                              choices in the server's order, the first the
//                                              default; espvpn waits for the answer
//   banner  TEXT                               a banner to accept; espvpn waits for the answer
//   message TEXT                               information (a form's message, SAML steps)
//   error   TEXT                               the server refused the last answers (e.g. "Login
//                                              failed"); the next ask is the form again
// A key's PIN on a token is asked as form "token", name "pin", kind password
// (kTokenPinForm): a wrong one is followed by an error record and the same ask.
// The program answers each ask and banner with one line: "=" and the value as typed
// (not escaped; it cannot hold a newline; a select's answer is the label chosen, a
// banner's any value = accepted), or "cancel".
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "protocols/base/result.h"
#include "crypto/secret.h"

namespace espvpn::prompt {

// The form of the PIN prompt of a key on a token (never answered by a stored password).
inline constexpr std::string_view kTokenPinForm = "token";

enum class RecordType { ask, banner, message, error };
enum class FieldKind { text, password, select };

struct Record {
    RecordType type = RecordType::message;
    // ask
    std::string form;
    std::string name;
    FieldKind kind = FieldKind::text;
    std::string label;
    std::vector<std::string> choices;
    // banner, message, error
    std::string text;
};

// One record as a line, with its final '\n'.
std::string encode(const Record& record);
// One line (without its '\n'): an error for a raw control character, an unknown
// escape or record type, a missing field, or a select without choices.
Result<Record> decode(std::string_view line);

// The longest line either side accepts (a banner may be long; 64 KiB).
inline constexpr std::size_t kMaxLine = 64 * 1024;

// An answer line (without its '\n'); an error when the value holds CR or LF.
Result<Secret> encode_answer(const Secret& value);
inline constexpr std::string_view kCancel = "cancel";

struct Answer {
    bool cancelled = false;
    Secret value;
};
// An answer line (without its '\n'): "=VALUE" or "cancel".
Result<Answer> decode_answer(const Secret& line);

}  // namespace espvpn::prompt
