//===- HtmlTest.cpp - The report page: embedding, escaping, data ----------===//

#include "cleave/Report/Html.h"
#include "cleave/CostModel/Estimate.h"
#include "cleave/Report/MeasuredTrace.h"

#include <gtest/gtest.h>

using namespace cleave;
using nlohmann::json;

namespace {

/// The text between the data element's tags.
std::string embedded(const std::string &page) {
  const std::string open = "id=\"cleave-data\">";
  size_t begin = page.find(open);
  EXPECT_NE(begin, std::string::npos);
  begin += open.size();
  size_t end = page.find("</script>", begin);
  EXPECT_NE(end, std::string::npos);
  return page.substr(begin, end - begin);
}

size_t occurrences(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at + 1))
    ++n;
  return n;
}

TEST(HtmlTest, TemplateIsCompiledInWithItsMarkers) {
  std::string_view t = report::htmlTemplate();
  EXPECT_EQ(t.substr(0, 15), "<!DOCTYPE html>");
  EXPECT_EQ(occurrences(std::string(t), "/*@CLEAVE_DATA@*/"), 1u);
  EXPECT_EQ(occurrences(std::string(t), "@CLEAVE_TITLE@"), 1u);
  // Self-contained: nothing is fetched (the SVG namespace is a name).
  EXPECT_EQ(occurrences(std::string(t), "src=\"http"), 0u);
  EXPECT_EQ(occurrences(std::string(t), "href=\"http"), 0u);
  EXPECT_EQ(occurrences(std::string(t), "@import"), 0u);
}

TEST(HtmlTest, EscapingKeepsTheScriptElementClosedAndTheJsonEqual) {
  json data = {{"model", "</script><script>alert(1)</script>"},
               {"note", "a & b <!-- c --> \xE2\x80\xA8 d"}};
  std::string page = report::renderHtml(data, "t");
  // Only the template's own script elements close.
  EXPECT_EQ(occurrences(page, "</script>"),
            occurrences(std::string(report::htmlTemplate()), "</script>"));
  EXPECT_EQ(occurrences(page, "<!--"),
            occurrences(std::string(report::htmlTemplate()), "<!--"));
  std::string text = embedded(page);
  EXPECT_EQ(text.find_first_of("<>&"), std::string::npos);
  EXPECT_EQ(text.find("\xE2\x80\xA8"), std::string::npos);
  EXPECT_EQ(json::parse(text), data);
}

TEST(HtmlTest, DataIsEmbeddedOnceAndTitleEscaped) {
  json data = {{"model", "gpt3-175b"}, {"gpus", 1024}};
  std::string page = report::renderHtml(data, "a <b> & \"c\"");
  EXPECT_EQ(occurrences(page, "\"gpus\":1024"), 1u);
  EXPECT_EQ(occurrences(page, "/*@CLEAVE_DATA@*/"), 0u);
  EXPECT_NE(page.find("<title>a &lt;b&gt; &amp; &quot;c&quot;</title>"),
            std::string::npos);
}

TEST(HtmlTest, EscapeForScriptWritesUnicodeEscapes) {
  EXPECT_EQ(report::escapeForScript("\"</a>&\""),
            "\"\\u003c/a\\u003e\\u0026\"");
  EXPECT_EQ(report::escapeForScript("x\xE2\x80\xA9y"), "x\\u2029y");
  // Other multi-byte characters pass unchanged.
  EXPECT_EQ(report::escapeForScript("\xE2\x80\x94"), "\xE2\x80\x94");
}

cost::ParallelPlan planOf(int tp, int cp, int dp, int pp) {
  cost::ParallelPlan p;
  p.tp = tp, p.cp = cp, p.dp = dp, p.pp = pp;
  return p;
}

TEST(HtmlTest, MeshSaysWhichAxisRunsOverWhichLink) {
  cost::Result<cost::ClusterSpec> c =
      cost::lookupClusterPreset("dgx-a100-80gb", 16);
  ASSERT_TRUE(c) << c.error();
  json m = report::meshToJson(planOf(8, 1, 4, 4), *c);
  EXPECT_EQ(m["gpus"], 128);
  EXPECT_EQ(m["nodes"], 16);
  ASSERT_EQ(m["axes"].size(), 4u);
  // Axes in rank order, the slowest first.
  EXPECT_EQ(m["axes"][0]["axis"], "pp");
  EXPECT_EQ(m["axes"][0]["stride"], 32);
  EXPECT_EQ(m["axes"][0]["link"], "inter");
  EXPECT_EQ(m["axes"][1]["axis"], "dp");
  EXPECT_EQ(m["axes"][1]["link"], "inter");
  EXPECT_EQ(m["axes"][2]["link"], "none");
  EXPECT_EQ(m["axes"][3]["axis"], "tp");
  EXPECT_EQ(m["axes"][3]["link"], "intra");
  // tp 2 x dp 8: dp groups have 4 ranks on each of 2 nodes.
  json half = report::meshToJson(planOf(2, 1, 8, 1), *c);
  EXPECT_EQ(half["axes"][1]["link"], "both");
  EXPECT_EQ(half["axes"][1]["ranks_per_node"], 4);
}

TEST(HtmlTest, PipelinePutsChunkKOnStageKModPp) {
  ModelConfig m = *lookupPreset("gpt3-175b");
  cost::ParallelPlan p = planOf(8, 1, 1, 4);
  p.schedule = cost::Schedule::Interleaved1F1B;
  p.virtualStages = 2;
  json j = report::pipelineToJson(m, p);
  ASSERT_EQ(j["stages"].size(), 4u);
  const json &s0 = j["stages"][0]["chunks"], &s3 = j["stages"][3]["chunks"];
  ASSERT_EQ(s0.size(), 2u);
  EXPECT_EQ(s0[0]["chunk"], 0);
  EXPECT_EQ(s0[1]["chunk"], 4);
  EXPECT_EQ(s0[0]["first_layer"], 0);
  EXPECT_EQ(s0[0]["last_layer"], 11);
  EXPECT_TRUE(s0[0].value("embedding", false));
  EXPECT_TRUE(s3[1].value("output_layer", false));
  EXPECT_EQ(s3[1]["last_layer"], 95);
}

TEST(HtmlTest, TimelineHasEveryTaskOfTheSimulatedStep) {
  ModelConfig m = *lookupPreset("gpt2-medium");
  cost::Result<cost::ClusterSpec> c = cost::lookupClusterPreset("dgx-h100", 1);
  cost::ParallelPlan p = planOf(2, 1, 2, 2);
  p.numMicroBatches = 4;
  cost::EstimateOptions o;
  o.keepTimeline = true;
  cost::Result<cost::Estimate> e = cost::estimate(m, *c, p, o);
  ASSERT_TRUE(e) << e.error();
  json t = report::picturesToJson(m, *c, p, *e)["timeline"];
  size_t tasks = 0;
  for (const cost::RankProgram &r : e->program->ranks)
    tasks += r.tasks.size();
  EXPECT_EQ(t["tasks"].size(), tasks);
  EXPECT_EQ(t["ranks"].size(), 2u);
  EXPECT_EQ(t["streams"][0], "compute");
  EXPECT_DOUBLE_EQ(t["step_time_s"].get<double>(), e->stepTime);
  // Forward passes of 4 micro-batches on each of 2 stages.
  int forwards = 0;
  for (const json &task : t["tasks"])
    forwards += task[5] == "forward" && task[6].get<int>() >= 0;
  EXPECT_EQ(forwards, 8);
  // Without a kept timeline: mesh and pipeline only.
  cost::Result<cost::Estimate> bare = cost::estimate(m, *c, p);
  EXPECT_FALSE(report::picturesToJson(m, *c, p, *bare).contains("timeline"));
}

} // namespace

namespace {

TEST(MeasuredTraceTest, StepsSplitIntoCommunicationAndTheComputeAround) {
  report::MeasuredRank r;
  r.rank = 1;
  r.steps = {{10.0, 10.010}, {10.020, 10.030}};
  r.flight = {{"entries",
               {// Set-up before the first step: left out.
                {{"op", "broadcast"},
                 {"group", 0},
                 {"seq", 1},
                 {"count", 4},
                 {"dtype", "f32"},
                 {"reduce", ""},
                 {"peer", -1},
                 {"start", 9.0},
                 {"end", 9.5},
                 {"state", "completed"}},
                {{"op", "all_reduce"},
                 {"group", 2},
                 {"seq", 2},
                 {"count", 8},
                 {"dtype", "f32"},
                 {"reduce", "sum"},
                 {"peer", -1},
                 {"start", 10.004},
                 {"end", 10.006},
                 {"state", "completed"}},
                {{"op", "all_reduce"},
                 {"group", 2},
                 {"seq", 3},
                 {"count", 8},
                 {"dtype", "f32"},
                 {"reduce", "sum"},
                 {"peer", -1},
                 {"start", 10.025},
                 {"end", 10.030},
                 {"state", "completed"}}}}};
  json t = report::measuredTrace({r});
  std::vector<json> compute, comm, steps;
  for (const json &e : t["traceEvents"]) {
    if (e["ph"] != "X")
      continue;
    EXPECT_EQ(e["pid"], 1);
    (e["tid"] == 0 ? compute : e["tid"] == 1 ? comm : steps).push_back(e);
  }
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_DOUBLE_EQ(steps[0]["ts"].get<double>(), 0.0);
  ASSERT_EQ(comm.size(), 2u);
  EXPECT_EQ(comm[0]["name"], "all_reduce g2");
  EXPECT_NEAR(comm[0]["ts"].get<double>(), 4000.0, 1e-6);
  EXPECT_NEAR(comm[0]["dur"].get<double>(), 2000.0, 1e-6);
  // Step 0: compute before and after its call; step 1: before only.
  ASSERT_EQ(compute.size(), 3u);
  EXPECT_NEAR(compute[0]["dur"].get<double>(), 4000.0, 1e-6);
  EXPECT_NEAR(compute[1]["ts"].get<double>(), 6000.0, 1e-6);
  EXPECT_NEAR(compute[2]["dur"].get<double>(), 5000.0, 1e-6);
}

} // namespace

namespace {

/// A completed call of `op` on group 2 with sequence number `seq`.
json call(const char *op, int seq, double start, double end) {
  return {
      {"op", op},       {"group", 2},          {"seq", seq}, {"count", 8},
      {"dtype", "f32"}, {"reduce", "sum"},     {"peer", -1}, {"start", start},
      {"end", end},     {"state", "completed"}};
}

TEST(MeasuredTimelineTest, ACollectiveIsSplitWhereTheLastRankEnteredIt) {
  report::MeasuredRank early, late;
  early.rank = 0;
  late.rank = 1;
  early.steps = {{0.0, 1.0}, {1.0, 2.0}};
  late.steps = {{0.0, 1.0}, {1.0, 2.0}};
  // Step 1: rank 0 enters the all-reduce at 1.2, rank 1 only at 1.5; both
  // leave at 1.6.
  early.flight = {{"entries", {call("all_reduce", 7, 1.2, 1.6)}}};
  late.flight = {{"entries", {call("all_reduce", 7, 1.5, 1.6)}}};
  // Only the last step.
  json t = report::measuredTimeline({early, late}, 1);
  EXPECT_EQ(t["ranks"], json({0, 1}));
  std::vector<json> rank0, rank1;
  for (const json &task : t["tasks"])
    (task[0] == 0 ? rank0 : rank1).push_back(task);
  // Rank 0: compute, the wait, the all-reduce, compute; times from 1.0.
  ASSERT_EQ(rank0.size(), 4u);
  EXPECT_EQ(rank0[1][5], "wait");
  EXPECT_EQ(rank0[1][4], "waits for all_reduce g2");
  EXPECT_NEAR(rank0[1][2].get<double>(), 0.2, 1e-12);
  EXPECT_NEAR(rank0[1][3].get<double>(), 0.5, 1e-12);
  EXPECT_EQ(rank0[2][5], "all_reduce");
  EXPECT_NEAR(rank0[2][2].get<double>(), 0.5, 1e-12);
  EXPECT_EQ(rank0[2][1], 1); // the communication stream
  EXPECT_EQ(rank0[3][6], 1); // step 1
  // Rank 1 arrived last: no wait.
  ASSERT_EQ(rank1.size(), 3u);
  for (const json &task : rank1)
    EXPECT_NE(task[5], "wait");
}

TEST(MeasuredTimelineTest, CallsOfAnotherInstanceOfTheGroupDoNotMatch) {
  // Ranks 0 and 1 run group 2's instance 0, rank 2 its instance 2 (two tp
  // groups): rank 2's late call is not one rank 0 waits for.
  std::vector<report::MeasuredRank> ranks(3);
  double starts[] = {0.2, 0.25, 0.7};
  for (int r = 0; r < 3; ++r) {
    ranks[size_t(r)].rank = r;
    ranks[size_t(r)].steps = {{0.0, 1.0}};
    ranks[size_t(r)].flight = {
        {"entries", {call("all_reduce", 1, starts[r], 0.8)}}};
    ranks[size_t(r)].groupInstance = {{2, r < 2 ? 0 : 2}};
  }
  json t = report::measuredTimeline(ranks, 1);
  for (const json &task : t["tasks"])
    if (task[0] == 0 && task[5] == "wait") {
      EXPECT_NEAR(task[3].get<double>(), 0.25, 1e-12);
      return;
    }
  ADD_FAILURE() << "rank 0 does not wait for rank 1: " << t.dump();
}

TEST(MeasuredTimelineTest, ACallNoOtherRankRecordedIsNotSplit) {
  report::MeasuredRank r;
  r.steps = {{0.0, 1.0}};
  r.flight = {{"entries", {call("recv", 3, 0.2, 0.9)}}};
  json t = report::measuredTimeline({r}, 5);
  ASSERT_EQ(t["tasks"].size(), 3u);
  EXPECT_EQ(t["tasks"][1][5], "recv");
  EXPECT_NEAR(t["tasks"][1][2].get<double>(), 0.2, 1e-12);
}

} // namespace
