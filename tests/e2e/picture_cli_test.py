"""End to end: the pictures of `oobleck-plan templates|plan|replan --svg` and `render`,
drawn from the real server's answers, rendered by a real SVG renderer (rsvg-convert from
librsvg2-bin) and read back with Pillow: the PNG is not blank, and the SVG's text holds the
layer ranges and node ids of the answer it drew.

Run by ctest (e2e_picture_cli) with /usr/bin/python3.
"""

import html
import json
import os
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_support  # noqa: E402

RSVG_CONVERT = shutil.which("rsvg-convert") or "/usr/bin/rsvg-convert"


class PictureCliTest(e2e_support.ExampleServerTestCase):

    def cluster(self, name):
        return os.path.join(e2e_support.ARGS.example_data, "clusters", name)

    def assert_renders(self, svg_path, min_colours=8):
        """rsvg-convert draws it; the PNG has many distinct colours (not blank)."""
        from PIL import Image
        png = svg_path[:-4] + ".png"
        result = subprocess.run([RSVG_CONVERT, "-o", png, svg_path], capture_output=True,
                                text=True, timeout=60)
        self.assertEqual(result.returncode, 0, result.stderr)
        with Image.open(png) as image:
            width, height = image.size
            colours = image.convert("RGB").getcolors(maxcolors=width * height)
        self.assertGreater(width, 400)
        self.assertGreater(height, 150)
        self.assertGreaterEqual(len(colours), min_colours, f"{png} is (nearly) blank")
        return colours

    def read(self, path):
        with open(path, encoding="utf-8") as f:
            return f.read()

    def assert_holds_stages(self, svg, pipelines):
        for p in pipelines:
            for s in p["template"]["stages"]:
                self.assertIn(f"[{s['layer_begin']},{s['layer_end']})", svg)

    def test_plan_and_replan_pictures(self):
        out = self.cli("plan", "--cluster", self.cluster("ditto-exp3.json"), "--global-batch",
                       "64", "--json", "--svg", self.path("plan.svg")).stdout
        self.assertIn("wrote", self.cli("plan", "--cluster", self.cluster("ditto-exp3.json"),
                                        "--global-batch", "64", "--svg",
                                        self.path("plan-again.svg")).stderr)
        planned = json.loads(out)
        self.save("plan.json", out)
        svg = self.read(self.path("plan.svg"))
        for node in planned["request"]["nodes"]:
            self.assertIn(html.escape(node["id"]), svg)
        self.assert_holds_stages(svg, planned["plan"]["pipelines"])
        self.assertIn(f"{planned['plan']['iteration_time_ms']:.2f} ms", svg)
        self.assert_renders(self.path("plan.svg"))

        victim = planned["plan"]["pipelines"][0]["node_ids"][0]
        out = self.cli("replan", "--plan", self.path("plan.json"), "--fail", victim, "--json",
                       "--svg", self.path("replan.svg")).stdout
        replanned = json.loads(out)
        self.save("replan.json", out)
        svg = self.read(self.path("replan.svg"))
        self.assertIn("FAILED", svg)
        self.assertIn(f"failed: {victim}", svg)
        self.assert_holds_stages(svg, replanned["plan"]["pipelines"])
        for copy in replanned["copies"]:
            self.assertIn(f"[{copy['layer_begin']},{copy['layer_end']})", svg)
            self.assertIn(f"{copy['source_node_id']} sends layers", svg)
            self.assertIn(copy["dest_node_id"], svg)
        self.assert_renders(self.path("replan.svg"))

        # render draws the saved answers exactly as --svg did.
        self.cli("render", self.path("replan.json"), "--plan", self.path("plan.json"), "--svg",
                 self.path("replan-rendered.svg"))
        self.assertEqual(self.read(self.path("replan-rendered.svg")), svg)
        stdout = self.cli("render", self.path("plan.json")).stdout
        self.assertEqual(stdout, self.read(self.path("plan.svg")))

    def test_templates_picture(self):
        out = self.cli("templates", "--cluster", self.cluster("ditto-exp2.json"), "--nodes",
                       "1-2", "--json", "--svg", self.path("templates.svg")).stdout
        results = json.loads(out)["results"]
        svg = self.read(self.path("templates.svg"))
        feasible = [r for r in results if r["feasible"]]
        self.assertTrue(feasible)
        for r in feasible:
            for s in r["template"]["stages"]:
                self.assertIn(f"[{s['layer_begin']},{s['layer_end']})", svg)
        for r in results:
            if not r["feasible"]:
                self.assertIn(html.escape(r["infeasible_reason"][:60], quote=False), svg)
        self.assertIn("(from the request)", svg)
        self.assert_renders(self.path("templates.svg"))

    def test_render_an_answer_of_the_python_client(self):
        """Python's json_format prints camelCase names; render reads them too."""
        import grpc
        from google.protobuf import json_format
        s = e2e_support.stubs()
        pb = s.planner_pb2
        planned = json.loads(self.cli("plan", "--cluster", self.cluster("ditto-exp2.json"),
                                      "--global-batch", "32", "--json").stdout)
        request = json_format.ParseDict(planned["request"], pb.PlanRequest())
        with grpc.insecure_channel(self.server.address) as channel:
            response = s.planner_pb2_grpc.PlannerStub(channel).Plan(request, timeout=60)
        self.save("python-plan.json", json_format.MessageToJson(response))
        self.cli("render", self.path("python-plan.json"), "--svg", self.path("python-plan.svg"))
        svg = self.read(self.path("python-plan.svg"))
        for node_id in (n.id for n in response.request.nodes):
            self.assertIn(node_id, svg)
        self.assert_renders(self.path("python-plan.svg"))

    def test_render_errors(self):
        err = self.cli("render", self.path("missing.json"), expect_code=1).stderr
        self.assertIn("NOT_FOUND: cannot open", err)
        self.assertIn("missing.json", err)
        err = self.cli("render", expect_code=2).stderr
        self.assertIn("render takes one argument (ANSWER.json)", err)
        self.save("not-an-answer.json", '{"profiles": []}')
        err = self.cli("render", self.path("not-an-answer.json"), expect_code=1).stderr
        self.assertIn("is not the --json answer of templates, plan or replan", err)
        planned = self.cli("plan", "--cluster", self.cluster("ditto-exp2.json"),
                           "--global-batch", "16", "--json").stdout
        self.save("p.json", planned)
        victim = json.loads(planned)["request"]["nodes"][0]["id"]
        self.save("r.json", self.cli("replan", "--plan", self.path("p.json"), "--fail", victim,
                                     "--json").stdout)
        err = self.cli("render", self.path("r.json"), expect_code=1).stderr
        self.assertIn("is a replan answer: pass --plan OLD.json", err)
        err = self.cli("plan", "--cluster", self.cluster("ditto-exp2.json"), "--global-batch",
                       "16", "--svg", "/nonexistent-dir/p.svg", expect_code=1).stderr
        self.assertIn("cannot write --svg /nonexistent-dir/p.svg", err)
        err = self.cli("stats", "--svg", self.path("x.svg"), expect_code=2).stderr
        self.assertIn("flag --svg does not apply to stats", err)


if __name__ == "__main__":
    e2e_support.main()
