// Incremental HTTP/1.1 response parser (sans-IO): feed it whatever bytes the
// socket gave, in chunks of any size, until done(). It never buffers more than
// its limits allow, so an endless or dribbling server ends in an error, not in
// unbounded memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "protocols/base/result.h"
#include "protocols/http/message.h"
#include "protocols/http/secret_buffer.h"

namespace espvpn::http {

struct ParserLimits {
    std::size_t max_header_bytes = 64 * 1024;     // status line + header section (and trailers)
    std::size_t max_header_count = 128;           // fields in one header section
    std::size_t max_body_bytes = 16 * 1024 * 1024;
    std::size_t max_interim_responses = 16;       // 1xx responses skipped before the final one
};

class ResponseParser {
public:
    explicit ResponseParser(ParserLimits limits = {}) : limits_(limits) { body_.limit_growth(limits.max_body_bytes); }

    // Expect a new response to a request with this method (HEAD and CONNECT
    // change how the body is framed).
    void begin(std::string_view request_method);

    // Consumes bytes up to the end of the response and returns how many it used;
    // bytes after the end (a tunnel after CONNECT) are left to the caller.
    Result<std::size_t> feed(std::span<const std::uint8_t> data);
    Result<std::size_t> feed(std::string_view data) {
        return feed({reinterpret_cast<const std::uint8_t*>(data.data()), data.size()});
    }
    // The peer closed the connection: ends a close-delimited body, an error otherwise.
    Status finish_eof();

    bool done() const { return state_ == State::done; }
    // The final status line and its header fields have arrived (the body may not
    // have): enough for a caller that reads only the head, as after a refused CONNECT.
    bool head_complete() const {
        return state_ != State::status_line && state_ != State::header_lines && state_ != State::failed;
    }
    // The response so far: status and headers once head_complete(), the body once done().
    const Response& head() const { return response_; }
    // Whether any byte of the response arrived (a reused connection that died
    // before this point may be retried).
    bool started() const { return started_; }

    // The complete response; call once when done().
    Response take_response();

private:
    enum class State {
        status_line, header_lines, body_length, chunk_size, chunk_data, chunk_data_end, trailer_lines,
        body_until_close, done, failed
    };

    Status fail(std::string message);
    Status on_line(std::string_view line);
    Status on_status_line(std::string_view line);
    Status on_header_line(std::string_view line, Headers& into);
    Status on_headers_complete();
    Status on_chunk_size_line(std::string_view line);
    Status append_body(std::span<const std::uint8_t> bytes);
    void finish_message();

    ParserLimits limits_;
    State state_ = State::status_line;
    bool head_request_ = false;
    bool connect_request_ = false;
    bool started_ = false;
    std::size_t section_bytes_ = 0;     // bytes of the current header/trailer section
    std::size_t interim_seen_ = 0;
    std::uint64_t remaining_ = 0;       // of a Content-Length body or current chunk
    SecretBuffer line_;                 // the incomplete line (may be a Set-Cookie)
    SecretBuffer body_;
    Response response_;
    Error error_;
};

}  // namespace espvpn::http
