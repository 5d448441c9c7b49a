#include "protocols/xml/document.h"

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xmlerror.h>

#include <cctype>
#include <cstring>
#include <mutex>

namespace espvpn::xml {

namespace {

// xmlInitParser is not thread-safe on first use; call it exactly once.
void init_libxml_once() {
    static std::once_flag once;
    std::call_once(once, [] { xmlInitParser(); });
}

std::string_view as_view(const xmlChar* s) {
    return s ? std::string_view(reinterpret_cast<const char*>(s)) : std::string_view{};
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

// Depth of the element tree, without recursion (the input is hostile).
std::size_t element_depth(xmlNodePtr root) {
    std::size_t depth = 0, max_depth = 0;
    xmlNodePtr n = root;
    while (n) {
        if (n->type == XML_ELEMENT_NODE && ++depth > max_depth) max_depth = depth;
        if (n->type == XML_ELEMENT_NODE && n->children) {
            n = n->children;
            continue;
        }
        if (n->type == XML_ELEMENT_NODE) --depth;
        while (n && n != root && !n->next) {
            n = n->parent;
            if (n && n->type == XML_ELEMENT_NODE) --depth;
        }
        if (!n || n == root) break;
        n = n->next;
    }
    return max_depth;
}

// True when any node of the tree is an entity reference (or an entity
// declaration): only a DTD can define one, and its text is never ours to expand.
// Iterative walk, like element_depth.
bool has_entity_node(xmlNodePtr root) {
    xmlNodePtr n = root;
    while (n) {
        if (n->type == XML_ENTITY_REF_NODE || n->type == XML_ENTITY_NODE || n->type == XML_ENTITY_DECL ||
            n->type == XML_DTD_NODE)
            return true;
        if (n->type == XML_ELEMENT_NODE) {
            for (xmlAttrPtr a = n->properties; a; a = a->next)
                for (xmlNodePtr c = a->children; c; c = c->next)
                    if (c->type == XML_ENTITY_REF_NODE) return true;
            if (n->children) {
                n = n->children;
                continue;
            }
        }
        while (n && n != root && !n->next) n = n->parent;
        if (!n || n == root) break;
        n = n->next;
    }
    return false;
}

// The text of the element's text and CDATA descendants, in document order; an
// entity reference contributes nothing (it is never expanded).
void append_text(xmlNodePtr root, std::string& out) {
    xmlNodePtr n = root->children;
    while (n) {
        if ((n->type == XML_TEXT_NODE || n->type == XML_CDATA_SECTION_NODE) && n->content)
            out += reinterpret_cast<const char*>(n->content);
        if (n->type == XML_ELEMENT_NODE && n->children) {
            n = n->children;
            continue;
        }
        while (n && n != root && !n->next) n = n->parent;
        if (!n || n == root) break;
        n = n->next;
    }
}

// Length of a character reference or one of XML's five predefined entity
// references at s[0] == '&', or 0. No other entity can be defined (documents
// with a DTD are refused), and libxml2's recover mode drops the rest of a text
// node after an undefined one, so everything else is escaped as literal text.
std::size_t reference_length(std::string_view s) {
    std::size_t i = 1;
    if (i < s.size() && s[i] == '#') {
        ++i;
        const bool hex = i < s.size() && (s[i] == 'x' || s[i] == 'X');
        if (hex) ++i;
        std::size_t start = i;
        while (i < s.size() && (hex ? std::isxdigit(static_cast<unsigned char>(s[i]))
                                    : std::isdigit(static_cast<unsigned char>(s[i]))))
            ++i;
        if (i == start) return 0;
        return i < s.size() && s[i] == ';' ? i + 1 : 0;
    }
    for (std::string_view name : {"amp;", "lt;", "gt;", "quot;", "apos;"})
        if (s.substr(1, name.size()) == name) return 1 + name.size();
    return 0;
}

// Servers send bare '&' in text (OC's fake server does). libxml2's recover
// mode would silently drop it, so escape it first and keep the character.
std::string escape_bare_ampersands(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size() + 16);
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        if (bytes[i] == '&' && reference_length(bytes.substr(i)) == 0)
            out += "&amp;";
        else
            out += bytes[i];
    }
    return out;
}

bool is_truncation(int code) {
    return code == XML_ERR_TAG_NOT_FINISHED || code == XML_ERR_GT_REQUIRED ||
           code == XML_ERR_LTSLASH_REQUIRED || code == XML_ERR_ATTRIBUTE_NOT_FINISHED ||
           code == XML_ERR_LITERAL_NOT_FINISHED || code == XML_ERR_COMMENT_NOT_FINISHED;
}

std::string last_error_text(xmlParserCtxtPtr ctxt) {
    const xmlError* err = xmlCtxtGetLastError(ctxt);
    if (!err || !err->message) return "unknown parse error";
    std::string msg(err->message);
    while (!msg.empty() && is_space(msg.back())) msg.pop_back();
    return msg + " (line " + std::to_string(err->line) + ")";
}

}  // namespace

std::string_view trim(std::string_view text) {
    while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
    while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
    return text;
}

void Document::Free::operator()(_xmlDoc* doc) const { xmlFreeDoc(doc); }

Result<Document> Document::parse(std::string_view bytes, const ParseLimits& limits) {
    if (trim(bytes).empty()) return make_error("empty document");
    if (bytes.size() > limits.max_bytes)
        return make_error("document too big (" + std::to_string(bytes.size()) +
                          " bytes, limit " + std::to_string(limits.max_bytes) + ")");
    if (bytes.size() > static_cast<std::size_t>(INT32_MAX)) return make_error("document too big");
    const std::string_view body = trim(bytes);
    if (body.front() != '<') return make_error("not XML: does not start with '<'");
    // Every complete document ends with '>' (an end tag, empty tag, comment or
    // PI); recover mode would quietly accept a reply cut inside its last tag.
    if (body.back() != '>') return make_error("truncated XML document: does not end with '>'");

    init_libxml_once();
    std::unique_ptr<xmlParserCtxt, void (*)(xmlParserCtxtPtr)> ctxt(xmlNewParserCtxt(),
                                                                    xmlFreeParserCtxt);
    if (!ctxt) return make_error("out of memory creating XML parser");
    // No DTD is loaded, no entity substituted, nothing fetched; the bytes are
    // read as UTF-8 whatever the document declares (a UTF-7 or UTF-16 document
    // would otherwise be decoded first, DTD and all). No GP or AnyConnect reply
    // has a DTD: one is refused after parsing, from the tree itself, which
    // removes entity definitions (billion laughs, external entities) whatever
    // the bytes looked like.
    const int options = XML_PARSE_RECOVER | XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING |
                        XML_PARSE_NOCDATA | XML_PARSE_IGNORE_ENC;
    std::string text = escape_bare_ampersands(bytes);
    xmlDocPtr raw = xmlCtxtReadMemory(ctxt.get(), text.data(), static_cast<int>(text.size()),
                                      "reply.xml", "UTF-8", options);
    secure_zero(text.data(), text.size());  // replies carry cookies and keys
    Document doc(raw);
    if (raw && (raw->intSubset || raw->extSubset))
        return make_error("DTDs are not accepted in server replies");
    if (!raw || !xmlDocGetRootElement(raw))
        return make_error("not XML: " + last_error_text(ctxt.get()));
    if (has_entity_node(reinterpret_cast<xmlNodePtr>(raw)))
        return make_error("DTDs are not accepted in server replies (the document references an entity)");
    std::size_t depth = element_depth(xmlDocGetRootElement(raw));
    if (depth > limits.max_depth)
        return make_error("document nested deeper than " + std::to_string(limits.max_depth) +
                          " elements");
    // libxml2 itself stops at 256 levels; in recover mode that leaves a
    // truncated tree, which must not pass as a whole document.
    const xmlError* err = xmlCtxtGetLastError(ctxt.get());
    if (err && err->code == XML_ERR_INTERNAL_ERROR)
        return make_error("not XML: " + last_error_text(ctxt.get()));
    // Recover mode accepts a cut-off document; a cut-off reply is an error.
    if (err && is_truncation(err->code))
        return make_error("truncated XML document: " + last_error_text(ctxt.get()));
    return doc;
}

Node Document::root() const { return Node(doc_ ? xmlDocGetRootElement(doc_.get()) : nullptr); }

Status Document::expect_root(std::string_view name) const {
    if (root_name() == name) return {};
    return make_error("unexpected root <" + std::string(root_name()) + ">, expected <" +
                      std::string(name) + ">");
}

Result<Node> Document::require(std::string_view path) const {
    Node n = root().child(path);
    if (!n)
        return make_error("missing element <" + std::string(root_name()) + "/" +
                          std::string(path) + ">");
    return n;
}

std::string_view Node::name() const { return node_ ? as_view(node_->name) : std::string_view{}; }

std::string Node::raw_text() const {
    std::string out;
    if (node_) append_text(node_, out);
    return out;
}

std::string Node::text() const { return std::string(trim(raw_text())); }

Secret Node::text_secret() const {
    if (!node_) return {};
    std::string content = raw_text();
    Secret out = Secret::from_string(trim(content));
    secure_zero(content.data(), content.size());
    return out;
}

Node Node::child(std::string_view path) const {
    xmlNodePtr cur = node_;
    while (cur && !path.empty()) {
        std::size_t slash = path.find('/');
        std::string_view step = path.substr(0, slash);
        path = slash == std::string_view::npos ? std::string_view{} : path.substr(slash + 1);
        xmlNodePtr found = nullptr;
        for (xmlNodePtr c = cur->children; c; c = c->next) {
            if (c->type == XML_ELEMENT_NODE && as_view(c->name) == step) {
                found = c;
                break;
            }
        }
        cur = found;
    }
    return Node(cur);
}

std::optional<std::string> Node::child_text(std::string_view path) const {
    Node n = child(path);
    if (!n) return std::nullopt;
    return n.text();
}

std::string Node::child_text_or_empty(std::string_view path) const {
    return child(path).text();
}

std::vector<Node> Node::children(std::string_view name) const {
    std::vector<Node> out;
    if (!node_) return out;
    for (xmlNodePtr c = node_->children; c; c = c->next)
        if (c->type == XML_ELEMENT_NODE && (name.empty() || as_view(c->name) == name))
            out.emplace_back(c);
    return out;
}

std::optional<std::string> Node::attribute(std::string_view name) const {
    if (!node_) return std::nullopt;
    std::string key(name);
    xmlChar* value = xmlGetNoNsProp(node_, reinterpret_cast<const xmlChar*>(key.c_str()));
    if (!value) return std::nullopt;
    std::string out(reinterpret_cast<const char*>(value));
    xmlFree(value);
    return out;
}

}  // namespace espvpn::xml
