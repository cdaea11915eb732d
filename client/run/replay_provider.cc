// Replies read from files: DIR/<task>/<arch>/[<knowledge>/]traj-NN/turn-MM.{cu,ptx,md,txt}.
// A .cu or .ptx file is the kernel itself (wrapped in a fenced block, so that it goes through
// the same extraction as a model's reply); a .md or .txt file is a whole reply, as a model
// wrote it. docs/client.md documents the layout.
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/run/provider.h"
#include "common/files.h"
#include "common/status.h"

namespace ptxbench::client::run {
namespace {

namespace fs = std::filesystem;

class ReplayProvider : public ModelProvider {
 public:
  explicit ReplayProvider(std::string dir) : dir_(std::move(dir)) {}

  absl::StatusOr<ModelReply> Complete(const std::vector<ChatMessage>&,
                                      const CallContext& context) override {
    const std::string trajectory = absl::StrFormat("traj-%02d", context.trajectory);
    const std::string turn = absl::StrFormat("turn-%02d", context.turn);
    const fs::path with_knowledge =
        fs::path(dir_) / context.task / context.arch / context.knowledge / trajectory;
    const fs::path without = fs::path(dir_) / context.task / context.arch / trajectory;
    const fs::path folder = fs::is_directory(with_knowledge) ? with_knowledge : without;
    for (const char* extension : {".cu", ".ptx", ".md", ".txt"}) {
      const fs::path path = folder / (turn + extension);
      if (!fs::exists(path)) continue;
      ASSIGN_OR_RETURN(const std::string text,
                       ReadFileToString(path.string(), "the replayed turn"));
      ModelReply reply;
      reply.stop_reason = "replay";
      const std::string ext = extension;
      if (ext == ".cu" || ext == ".ptx") {
        reply.text = absl::StrCat("```", ext == ".cu" ? "cuda" : "ptx", "\n", text,
                                  text.empty() || text.back() == '\n' ? "" : "\n", "```\n");
      } else {
        reply.text = text;
      }
      return reply;
    }
    return absl::OutOfRangeError(
        absl::StrCat(kReplayExhausted, ": no ", turn, ".{cu,ptx,md,txt} in ", folder.string()));
  }

  std::string kind() const override { return "replay"; }

 private:
  std::string dir_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ModelProvider>> MakeReplayProvider(const std::string& dir) {
  if (!fs::is_directory(dir)) {
    return absl::NotFoundError(absl::StrCat("replay:", dir, ": not a folder"));
  }
  return std::unique_ptr<ModelProvider>(new ReplayProvider(dir));
}

}  // namespace ptxbench::client::run
