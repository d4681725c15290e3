// Picking tier bandwidths from the hardware profile; the rules are in tier_rates.h.
#include "plan/tier_rates.h"

#include <functional>

#include "plan/plan.h"
#include "util/units.h"

namespace strata {

namespace {

std::string rate_text(double bytes_per_second) {
    return format_bytes(static_cast<uint64_t>(bytes_per_second), /*decimal=*/true) + "/s";
}

// The fastest read of `d` that `accept` admits, or null.
const DiskReadRate* best_read(const DiskProfile& d,
                              const std::function<bool(const DiskReadRate&)>& accept) {
    const DiskReadRate* best = nullptr;
    for (const DiskReadRate& r : d.reads) {
        if (r.bandwidth > 0 && accept(r) && (!best || r.bandwidth > best->bandwidth)) best = &r;
    }
    return best;
}

}  // namespace

TierRate ram_rate(const HardwareProfile& p) {
    if (p.memory.read_bandwidth > 0) {
        return {p.memory.read_bandwidth,
                "measured: " + std::to_string(p.memory.threads) + " threads reading " +
                    format_bytes(p.memory.buffer),
                true};
    }
    return {kAssumedRamBandwidth,
            "assumed: the profile has no RAM bandwidth (" + rate_text(kAssumedRamBandwidth) + ")",
            false};
}

TierRate gpu_rate(const HardwareProfile& p) {
    if (p.gpus.empty()) return {0, "no GPU", false};
    const GpuProfile& g = p.gpus.front();
    if (g.read_bandwidth > 0)
        return {g.read_bandwidth, "measured: kernel reads on " + g.name, true};
    if (g.device_copy_bandwidth <= 0) return {0, g.name + ": not measured", false};
    return {g.device_copy_bandwidth / 2, "measured: half the device copy rate of " + g.name, true};
}

DiskRatePick disk_rate(const HardwareProfile& p, int disk) {
    DiskRatePick out;
    const DiskProfile* d =
        disk >= 0 && static_cast<size_t>(disk) < p.disks.size() ? &p.disks[disk] : nullptr;
    if (d && d->block_size > 0) out.block_size = d->block_size;
    const DiskReadRate* r = nullptr;
    if (d) {
        constexpr uint32_t kMiB = 1u << 20;
        r = best_read(*d, [](const DiskReadRate& x) {
            return x.block >= kMiB && x.block <= 4 * kMiB && x.queue_depth >= 4;
        });
        if (!r) r = best_read(*d, [](const DiskReadRate& x) { return x.block >= kMiB; });
        if (!r) r = best_read(*d, [](const DiskReadRate&) { return true; });
    }
    if (!r) {
        out.rate = {kAssumedDiskBandwidth,
                    std::string("assumed: ") +
                        (d ? "nothing was measured on the disk holding the model"
                           : "the profile has no entry for the disk holding the model") +
                        " (" + rate_text(kAssumedDiskBandwidth) + ", a typical NVMe drive)",
                    false};
        return out;
    }
    std::string where = d->device.empty() ? d->source : d->device;
    if (where.empty()) where = d->mount_point;
    out.rate = {r->bandwidth,
                "measured: " + format_bytes(r->block) + " reads at queue depth " +
                    std::to_string(r->queue_depth) + (d->direct ? " with O_DIRECT" : "") + " on " +
                    where,
                true};
    return out;
}

}  // namespace strata
