# Homebrew Formula for the Agent Forge Worker on macOS (the template:
# scripts/render-formula.sh fills in the release's version, commit, the
# darwin archives' SHA-256 from its SHA256SUMS and the Worker's binaries:
# forge-worker, the reference plugin and every agent plugin of
# pkg/install/agent-plugins.txt; the release workflow builds
# the bottles and publishes the rendered Formula to the tap).
class ForgeWorker < Formula
  desc "Agent Forge Worker and its plugins: runs agent jobs leased by a Gate"
  homepage "https://github.com/0k-lab/agent-forge"
  version "@VERSION@"

  on_macos do
    on_arm do
      url "@URL_BASE@/agent-forge-worker_@TAG@_darwin_arm64.tar.gz"
      sha256 "@SHA256_ARM64@"
    end
    on_intel do
      url "@URL_BASE@/agent-forge-worker_@TAG@_darwin_amd64.tar.gz"
      sha256 "@SHA256_AMD64@"
    end
  end

  depends_on :macos

  def install
    bin.install @BINARIES@
  end

  def caveats
    <<~EOS
      A macOS Worker has no Landlock sandbox: its worker.json must say
      "sandbox": "none" (docs/config.md), which gives up the agent sandbox.
    EOS
  end

  test do
    %w[@BINARY_WORDS@].each do |name|
      assert_equal "#{name} @TAG@ @COMMIT@\n", shell_output("#{bin}/#{name} --version")
    end
  end
end
