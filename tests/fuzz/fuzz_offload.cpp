// libFuzzer target for src/io/offload: a virtio_net_hdr and a packet go through
// split_super_packet; whatever it produces, plus the raw input cut into
// length-prefixed packets, goes through GroCoalescer, whose output (its writev pieces gathered) must
// split again without error. Build and run: tools/fuzz-offload [SECONDS]
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "src/io/offload.h"

using namespace espvpn::io;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static PacketBatch split_out({128, 65535, 16, 0});
    static PacketBatch raw({32, 65535, 16, 0});
    static PacketBatch resplit({256, 65535, 16, 0});
    static GroCoalescer gro(256);
    static std::vector<std::uint8_t> gathered;
    if (size < kVirtioNetHdrSize + 1) return 0;
    VirtioNetHdr hdr;
    parse_virtio_net_hdr({data, size}, hdr);
    const bool uso = data[kVirtioNetHdrSize] & 1;
    std::span<const std::uint8_t> rest{data + kVirtioNetHdrSize + 1, size - kVirtioNetHdrSize - 1};

    split_out.clear();
    SplitOutcome r = split_super_packet(hdr, rest, split_out);
    if (r.packets != split_out.size()) std::abort();

    // The same bytes as a sequence of [len:2][packet] records.
    raw.clear();
    for (std::size_t at = 0; at + 2 <= rest.size() && !raw.full();) {
        std::size_t len = std::size_t(rest[at]) << 8 | rest[at + 1];
        at += 2;
        len = std::min(len, rest.size() - at);
        std::memcpy(raw.next_room().data(), rest.data() + at, len);
        raw.commit(len);
        at += len;
    }
    for (PacketBatch* b : {&split_out, &raw}) {
        GroCoalescer::Outcome g = gro.coalesce(*b, true, uso);
        if (g.error != OffloadError::none) std::abort();
        for (std::size_t k = 0; k < g.writes(); ++k) {
            gathered.clear();
            for (const iovec& piece : g.write(k)) {
                const auto* at = static_cast<const std::uint8_t*>(piece.iov_base);
                gathered.insert(gathered.end(), at, at + piece.iov_len);
            }
            std::span<const std::uint8_t> p = gathered;
            VirtioNetHdr h;
            if (!parse_virtio_net_hdr(p, h)) std::abort();
            if (h.gso_type == VirtioNetHdr::kGsoNone) continue;
            resplit.clear();
            // A coalesced packet is something we built: it must split cleanly.
            SplitOutcome s = split_super_packet(h, p.subspan(kVirtioNetHdrSize), resplit);
            if (s.error != OffloadError::none) std::abort();
        }
    }
    return 0;
}
