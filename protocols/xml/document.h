// A small read-only view of an XML document, over libxml2, for the login
// replies of GlobalProtect and AnyConnect. Parsing is lenient ("recover"
// mode) because real peers and OpenConnect's fake server send bare '&' and
// mismatched closing tags, but it never touches the network, never expands
// entities, reads every document as UTF-8 (a declared encoding is ignored),
// refuses any document whose parsed tree has a DTD or an entity reference, and
// caps size and nesting depth.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocols/base/result.h"
#include "crypto/secret.h"

struct _xmlDoc;
struct _xmlNode;

namespace espvpn::xml {

struct ParseLimits {
    std::size_t max_bytes = 1 << 20;  // login replies are a few KiB
    std::size_t max_depth = 64;       // GP/AnyConnect replies nest < 10 deep
};

// A non-owning handle to an element; valid while its Document lives.
// A default (null) Node answers every query with "absent".
class Node {
public:
    Node() = default;
    explicit Node(_xmlNode* node) : node_(node) {}

    explicit operator bool() const { return node_ != nullptr; }
    std::string_view name() const;

    // All text below this element (text and CDATA nodes; never an entity's
    // expansion), concatenated, as-is / with ASCII whitespace trimmed at both ends.
    std::string raw_text() const;
    std::string text() const;
    Secret text_secret() const;

    // First element along a '/'-separated path of element names ("a/b/c").
    Node child(std::string_view path) const;
    // Trimmed text of child(path); nullopt when the element is absent.
    std::optional<std::string> child_text(std::string_view path) const;
    // Trimmed text of child(path), or "" when absent.
    std::string child_text_or_empty(std::string_view path) const;

    // Element children, optionally only those named `name`.
    std::vector<Node> children(std::string_view name = {}) const;

    std::optional<std::string> attribute(std::string_view name) const;

private:
    _xmlNode* node_ = nullptr;
};

class Document {
public:
    // Errors: "empty document", "document too big (N bytes, limit M)",
    // "not XML: <reason>", "document nested deeper than N elements",
    // "DTDs are not accepted".
    static Result<Document> parse(std::string_view bytes, const ParseLimits& limits = {});

    Node root() const;
    std::string_view root_name() const { return root().name(); }

    // "unexpected root <X>, expected <Y>"
    Status expect_root(std::string_view name) const;
    // child(path) of the root, or "missing element <root/path>"
    Result<Node> require(std::string_view path) const;

private:
    struct Free {
        void operator()(_xmlDoc* doc) const;
    };
    explicit Document(_xmlDoc* doc) : doc_(doc) {}
    std::unique_ptr<_xmlDoc, Free> doc_;
};

// Trims ASCII whitespace at both ends.
std::string_view trim(std::string_view text);

}  // namespace espvpn::xml
