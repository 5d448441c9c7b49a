// Cuts a byte stream (a TLS connection's plaintext) into header+payload
// frames, however the stream was cut into reads. Shared by the GP HTTPS
// tunnel (16-byte frames) and AnyConnect's CSTP (8-byte frames): they differ
// only in how a header is checked, which the caller passes to next().
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <vector>

#include "protocols/base/result.h"

namespace espvpn::framing {

// Info is what a checked header says; it must carry `payload_len`.
template <class Info>
struct SplitFrame {
    Info info;
    // Points into the caller's input (whole frame at hand: no copy) or into the
    // splitter's buffer (frame cut across reads); valid until the next call to
    // next() and while the caller's input buffer is unchanged.
    std::span<const std::uint8_t> payload;
};

template <class Info>
class FrameSplitter {
public:
    // The buffer is allocated once, for the largest frame the check admits.
    FrameSplitter(std::size_t header_size, std::size_t max_payload)
        : buf_(header_size + max_payload), header_size_(header_size), need_(header_size) {}

    // Consumes bytes from the front of `input` until a frame is complete
    // (returned) or the input runs out (nullopt, all of it consumed).
    // `check(std::span<const uint8_t> header)` returns Result<Info>; its error is
    // returned as is, and the payload length it admits must fit max_payload.
    template <class Check>
    Result<std::optional<SplitFrame<Info>>> next(std::span<const std::uint8_t>& input, Check&& check) {
        if (have_ == 0 && input.size() >= header_size_) {
            auto info = check(input.first(header_size_));
            if (!info) return info.error();
            const std::size_t total = header_size_ + info->payload_len;
            if (input.size() >= total) {
                SplitFrame<Info> frame{*info, input.subspan(header_size_, info->payload_len)};
                input = input.subspan(total);
                return std::optional(frame);
            }
        }
        while (!input.empty()) {
            const std::size_t take = std::min(need_ - have_, input.size());
            std::memcpy(buf_.data() + have_, input.data(), take);
            have_ += take;
            input = input.subspan(take);
            if (have_ < need_) break;
            if (need_ == header_size_) {
                auto info = check(std::span<const std::uint8_t>(buf_.data(), header_size_));
                if (!info) return info.error();
                info_ = *info;
                need_ = header_size_ + info_->payload_len;
                if (have_ < need_) continue;
            }
            SplitFrame<Info> frame{*info_, std::span<const std::uint8_t>(buf_.data() + header_size_,
                                                                         need_ - header_size_)};
            have_ = 0;
            need_ = header_size_;
            return std::optional(frame);
        }
        return std::optional<SplitFrame<Info>>{};
    }

    // Bytes of an incomplete frame held (for "EOF in the middle of a frame").
    std::size_t pending() const { return have_; }

private:
    std::vector<std::uint8_t> buf_;
    std::size_t header_size_;
    std::size_t have_ = 0;
    std::size_t need_;
    std::optional<Info> info_;  // the header of the frame being gathered
};

}  // namespace espvpn::framing
