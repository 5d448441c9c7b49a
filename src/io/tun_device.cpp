#include "src/io/tun_device.h"

#include <fcntl.h>
#include <net/if.h>  // before linux/if_tun.h: it must not pull in linux/if.h
#include <linux/if_tun.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "src/log/logger.h"

// USO arrived in Linux 6.2; Debian 12's headers predate it.
#ifndef TUN_F_USO4
#define TUN_F_USO4 0x20
#endif
#ifndef TUN_F_USO6
#define TUN_F_USO6 0x40
#endif

namespace espvpn::io {

namespace {
constexpr std::size_t kMaxSuperPacket = 65535;
constexpr std::size_t kMaxWriteBatch = 1024;
std::string errno_text(int err) { return std::strerror(err); }

// Raises the interface's txqueuelen to `wanted` (never lowers it); returns the length
// it has afterwards, 0 if it cannot be read. Not fatal: the tun works either way.
unsigned raise_tx_queue_len(const char* name, unsigned wanted) {
    const int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) return 0;
    ifreq q{};
    std::memcpy(q.ifr_name, name, std::min<std::size_t>(std::strlen(name), IFNAMSIZ - 1));
    unsigned now = ::ioctl(s, SIOCGIFTXQLEN, &q) == 0 ? static_cast<unsigned>(q.ifr_qlen) : 0;
    if (wanted > now) {
        q.ifr_qlen = static_cast<int>(wanted);
        if (::ioctl(s, SIOCSIFTXQLEN, &q) == 0) now = wanted;
        else LOG_DEBUG << "tun " << name << ": txqueuelen " << wanted << ": " << errno_text(errno);
    }
    ::close(s);
    return now;
}
}  // namespace

std::uint64_t TunCounters::split_drop_total() const {
    std::uint64_t total = 0;
    for (auto v : split_drops) total += v;
    return total;
}

Result<TunDevice> TunDevice::open(const TunOptions& options) {
    if (options.name.size() >= IFNAMSIZ) return make_error("tun name too long: '" + options.name + "'");
    TunDevice dev;
    dev.fd_ = ::open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (dev.fd_ < 0) return make_error("open /dev/net/tun: " + errno_text(errno));

    ifreq ifr{};
    std::memcpy(ifr.ifr_name, options.name.data(), options.name.size());
    ifr.ifr_flags = IFF_TUN | IFF_NO_PI | (options.offload ? IFF_VNET_HDR : 0);
    int rc = ::ioctl(dev.fd_, TUNSETIFF, &ifr);
    if (rc != 0 && options.offload && errno == EINVAL) {
        // A kernel without vnet headers: plain packets instead.
        LOG_INFO << "tun: IFF_VNET_HDR refused (" << errno_text(errno) << "), running without offloads";
        ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
        rc = ::ioctl(dev.fd_, TUNSETIFF, &ifr);
    }
    if (rc != 0) return make_error("TUNSETIFF '" + options.name + "': " + errno_text(errno));
    {
        unsigned int features = 0;
        ifreq got{};
        if (::ioctl(dev.fd_, TUNGETIFF, &got) == 0) features = static_cast<unsigned short>(got.ifr_flags);
        dev.offloads_.vnet_hdr = (features & IFF_VNET_HDR) != 0;
    }
    dev.name_ = ifr.ifr_name;
    dev.ifindex_ = static_cast<int>(if_nametoindex(ifr.ifr_name));
    if (dev.ifindex_ == 0) return make_error("tun '" + dev.name_ + "' has no interface index");
    const unsigned tx_queue_len = options.tx_queue_len ? raise_tx_queue_len(ifr.ifr_name, options.tx_queue_len) : 0;

    if (dev.offloads_.vnet_hdr) {
        int hdr_size = static_cast<int>(kVirtioNetHdrSize);
        if (::ioctl(dev.fd_, TUNSETVNETHDRSZ, &hdr_size) != 0)
            return make_error("TUNSETVNETHDRSZ: " + errno_text(errno));
        // Ask for the most and step down: USO is newer than TSO.
        const unsigned tso = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6;
        unsigned attempts[3] = {tso | TUN_F_USO4 | TUN_F_USO6, tso, 0};
        for (unsigned flags : attempts) {
            if (!options.allow_uso && (flags & TUN_F_USO4)) continue;
            if (::ioctl(dev.fd_, TUNSETOFFLOAD, flags) == 0) {
                dev.offloads_.flags = flags;
                break;
            }
            LOG_DEBUG << "tun: TUNSETOFFLOAD 0x" << std::hex << flags << " refused: " << errno_text(errno);
        }
        dev.offloads_.csum = dev.offloads_.flags & TUN_F_CSUM;
        dev.offloads_.tso = dev.offloads_.flags & TUN_F_TSO4;
        dev.offloads_.uso = dev.offloads_.flags & TUN_F_USO4;
        dev.gro_ = std::make_unique<GroCoalescer>(kMaxWriteBatch);
    }
    dev.read_buf_.reset(new std::uint8_t[kVirtioNetHdrSize + kMaxSuperPacket]);
    LOG_DEBUG << "tun " << dev.name_ << ": vnet_hdr=" << dev.offloads_.vnet_hdr << " tso=" << dev.offloads_.tso
              << " uso=" << dev.offloads_.uso
              << " txqueuelen=" << tx_queue_len;
    return dev;
}

TunDevice TunDevice::adopt(int fd, std::string name, int ifindex, const TunOffloads& offloads,
                           std::function<Status(unsigned)> set_mtu) {
    TunDevice dev;
    dev.fd_ = fd;
    dev.name_ = std::move(name);
    dev.ifindex_ = ifindex;
    dev.offloads_ = offloads;
    dev.offloads_.csum = offloads.flags & TUN_F_CSUM;
    dev.offloads_.tso = offloads.flags & TUN_F_TSO4;
    dev.offloads_.uso = offloads.flags & TUN_F_USO4;
    if (dev.offloads_.vnet_hdr) dev.gro_ = std::make_unique<GroCoalescer>(kMaxWriteBatch);
    dev.read_buf_.reset(new std::uint8_t[kVirtioNetHdrSize + kMaxSuperPacket]);
    dev.set_mtu_ = std::move(set_mtu);
    return dev;
}

TunDevice::TunDevice(TunDevice&& o) noexcept { *this = std::move(o); }

TunDevice& TunDevice::operator=(TunDevice&& o) noexcept {
    if (this != &o) {
        close();
        fd_ = o.fd_;
        o.fd_ = -1;
        ifindex_ = o.ifindex_;
        name_ = std::move(o.name_);
        offloads_ = o.offloads_;
        counters_ = o.counters_;
        read_buf_ = std::move(o.read_buf_);
        pending_ = o.pending_;
        gro_ = std::move(o.gro_);
        netlink_ = std::move(o.netlink_);
        addresses_ = std::move(o.addresses_);
        routes_ = std::move(o.routes_);
        set_mtu_ = std::move(o.set_mtu_);
    }
    return *this;
}

TunDevice::~TunDevice() { close(); }

void TunDevice::close() {
    if (fd_ < 0) return;
    // A persistent tun outlives us: take back what we configured on it.
    if (netlink_) {
        for (const auto& [route, metric] : routes_) {
            if (Status s = netlink_->delete_route(ifindex_, route, metric); !s) {
                LOG_DEBUG << "tun " << name_ << ": " << s.error().message;
            }
        }
        for (const auto& address : addresses_) {
            if (Status s = netlink_->delete_address(ifindex_, address); !s) {
                LOG_DEBUG << "tun " << name_ << ": " << s.error().message;
            }
        }
    }
    routes_.clear();
    addresses_.clear();
    ::close(fd_);
    fd_ = -1;
}

namespace {
Status ensure_netlink(std::unique_ptr<RtNetlink>& nl) {
    if (nl) return {};
    auto opened = RtNetlink::open();
    if (!opened) return opened.error();
    nl = std::make_unique<RtNetlink>(std::move(*opened));
    return {};
}
}  // namespace

Status TunDevice::set_mtu(unsigned mtu) {
    if (set_mtu_) return set_mtu_(mtu);
    if (Status s = ensure_netlink(netlink_); !s) return s;
    return netlink_->set_mtu(ifindex_, mtu);
}

Status TunDevice::set_tx_queue_len(unsigned packets) {
    if (Status s = ensure_netlink(netlink_); !s) return s;
    return netlink_->set_tx_queue_len(ifindex_, packets);
}

Status TunDevice::set_up(bool up) {
    if (Status s = ensure_netlink(netlink_); !s) return s;
    return netlink_->set_up(ifindex_, up);
}

Status TunDevice::add_address(const InterfaceAddress& prefix) {
    if (Status s = ensure_netlink(netlink_); !s) return s;
    if (Status s = netlink_->add_address(ifindex_, prefix); !s) return s;
    addresses_.push_back(prefix);
    return {};
}

Status TunDevice::add_route(const InterfaceAddress& destination, unsigned metric) {
    if (Status s = ensure_netlink(netlink_); !s) return s;
    if (Status s = netlink_->add_route(ifindex_, destination, metric); !s) return s;
    routes_.emplace_back(destination, metric);
    return {};
}

bool TunDevice::wait_readable(int timeout_ms) const {
    if (pending_) return true;
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, timeout_ms) > 0 && (p.revents & POLLIN);
}

Result<std::size_t> TunDevice::read_packets(PacketBatch& out) {
    const std::size_t start = out.size();
    const std::size_t hdr_size = offloads_.vnet_hdr ? kVirtioNetHdrSize : 0;
    while (!out.full()) {
        if (!pending_) {
            ssize_t n = ::read(fd_, read_buf_.get(), hdr_size + kMaxSuperPacket);
            if (n < 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK) break;
                if (errno == EINTR) continue;
                return make_error("tun " + name_ + " read: " + errno_text(errno));
            }
            ++counters_.reads;
            if (static_cast<std::size_t>(n) <= hdr_size) {
                ++counters_.split_drops[static_cast<std::size_t>(OffloadError::truncated)];
                continue;
            }
            pending_ = static_cast<std::size_t>(n);
        }
        std::span<const std::uint8_t> packet{read_buf_.get() + hdr_size, pending_ - hdr_size};
        VirtioNetHdr hdr;
        if (hdr_size) (void)parse_virtio_net_hdr({read_buf_.get(), hdr_size}, hdr);
        SplitOutcome r = split_super_packet(hdr, packet, out);
        if (r.error == OffloadError::batch_full) break;  // fits an emptier batch: keep it for the next call
        pending_ = 0;
        if (r.error != OffloadError::none) {
            ++counters_.split_drops[static_cast<std::size_t>(r.error)];
            continue;
        }
        if (hdr.gso_type != VirtioNetHdr::kGsoNone) ++counters_.super_packets;
        counters_.packets_out += r.packets;
    }
    return out.size() - start;
}

Result<std::size_t> TunDevice::write_packets(PacketBatch& batch) {
    std::size_t writes = 0;
    auto write_one = [&](std::span<const iovec> pieces) -> Status {
        for (;;) {
            if (::writev(fd_, pieces.data(), static_cast<int>(pieces.size())) >= 0) {
                ++writes;
                ++counters_.writes;
                return {};
            }
            if (errno == EINTR) continue;
            // EIO/EINVAL: the kernel refused this packet; others: the device is gone.
            if (errno == EIO || errno == EINVAL || errno == EAGAIN || errno == ENOBUFS) {
                ++counters_.write_errors;
                return {};
            }
            return make_error("tun " + name_ + " write: " + errno_text(errno));
        }
    };
    if (!offloads_.vnet_hdr) {
        for (std::size_t i = 0; i < batch.size(); ++i) {
            std::span<std::uint8_t> p = batch.packet(i);
            const iovec whole{p.data(), p.size()};
            if (Status s = write_one({&whole, 1}); !s) return s.error();
        }
    } else {
        GroCoalescer::Outcome r = gro_->coalesce(batch, offloads_.tso, offloads_.uso);
        if (r.error != OffloadError::none) return make_error(std::string("tun write: ") + describe(r.error));
        for (std::size_t k = 0; k < r.writes(); ++k)
            if (Status s = write_one(r.write(k)); !s) return s.error();
    }
    counters_.packets_in += batch.size();
    return writes;
}

}  // namespace espvpn::io
