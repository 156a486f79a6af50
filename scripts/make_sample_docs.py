#!/usr/bin/env python3
"""Generate the binary sample documents (PDF and DOCX) in knowledge_bases/.

The Markdown and HTML samples are plain files checked in directly; the PDF and
DOCX samples are defined here, in a tiny Markdown-like notation, and rendered
with fpdf2 and python-docx. Output is deterministic: fixed metadata dates and
normalised ZIP timestamps make reruns byte-identical for a given fpdf2 /
python-docx version.

Usage (from the repo root):

    python3 -m venv /tmp/samples-venv
    /tmp/samples-venv/bin/pip install python-docx fpdf2 pypdf
    /tmp/samples-venv/bin/python scripts/make_sample_docs.py

Notation used in the document sources below:

    # Title            -> Heading 1 (PDF: large bold title, outline level 0)
    ## Section         -> Heading 2
    ### Subsection     -> Heading 3
    - item             -> bulleted list item
    1. item            -> numbered list item
    | a | b |          -> table row (first row of a block is the header row)
    ```                -> code block fence
    ---pagebreak---    -> page break (PDF and DOCX)
    other lines        -> paragraph text; consecutive lines are joined
    **bold** and `code` are rendered in DOCX, and stripped in PDF.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import re
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KB_DIR = ROOT / "knowledge_bases"
FIXED_DATE = dt.datetime(2025, 11, 3, 9, 0, 0, tzinfo=dt.UTC)
ZIP_DATE = (2025, 11, 3, 9, 0, 0)

# --------------------------------------------------------------------------
# Document sources
# --------------------------------------------------------------------------

DOCS: dict[str, dict] = {}


def doc(path: str, *, title: str, author: str, header: str = "", lang: str = "en"):
    def register(src: str) -> str:
        DOCS[path] = {"title": title, "author": author, "header": header, "lang": lang, "source": src}
        return src

    return register


# ============================== people ====================================

doc(
    "people/docs/expenses-and-reimbursement.pdf",
    title="Expenses and Reimbursement Policy",
    author="Lumen Freight Finance Operations",
    header="Lumen Freight - Internal policy PPL-FIN-002",
)("""
# Expenses and Reimbursement Policy

Policy ID PPL-FIN-002. Owners: Finance Operations and People Operations. Applies to all employees outside mainland China; Shanghai office employees follow the Chinese-language Shanghai expense policy instead.

## Purpose and principles

Lumen Freight reimburses reasonable costs that you incur while doing your job. Spend company money as if it were your own: choose the sensible option, keep receipts, and submit claims promptly. If you are unsure whether something is reimbursable, ask before you spend, not after.

## How to submit an expense claim

1. Photograph the receipt with the Ledgerly mobile app, or forward the e-mail receipt to receipts@lumenfreight.example. Ledgerly is our expense tool and is also available at expenses.lumenfreight.example.
2. Choose the expense category and your cost center, and write a short business purpose, for example "Client visit, Acme Foods, Rotterdam".
3. Submit the claim within 30 days of the purchase date. Claims older than 90 days are rejected automatically by Ledgerly.
4. Your manager approves the claim in Ledgerly. Finance Operations then audits a sample of claims every week.

### Receipts

An itemised receipt is required for any expense over $25 (or the local-currency equivalent). Below $25, the card statement line is enough. If you lose a receipt, complete the Missing Receipt Declaration in Ledgerly; you may use it at most twice per quarter.

### Approval limits

| Claim amount | Who must approve |
| Up to $2,000 | Your manager |
| $2,000.01 to $7,500 | Your manager and your department head |
| Over $7,500 | Manager, department head and the VP Finance |

### When you get paid

Approved claims are reimbursed through payroll, as a separate non-taxable line on your payslip. Claims approved by the 20th of a month are paid with that month's payroll; claims approved later are paid the following month. Outside the monthly payroll cycle, Finance runs an extra reimbursement payment every other Friday, so in practice money arrives within 10 business days of approval.

---pagebreak---

## Travel

### Booking

Book all flights, trains, hotels and rental cars through TripDesk, our travel booking tool. Every trip needs pre-approval from your manager inside TripDesk before anything is booked. Book flights at least 14 days ahead where possible; last-minute fares need a one-line justification.

### Flights

- Economy class for flights with a scheduled duration under 6 hours.
- Premium economy is allowed for flights of 6 hours or more.
- Business class only with written CFO approval, normally for medical reasons.
- Airline lounge memberships and seat upgrades are not reimbursed.

### Hotels

Hotels are capped per night, excluding taxes. TripDesk shows the cap when you search.

| City tier | Examples | Nightly cap |
| Tier 1 | New York, San Francisco, London, Zurich | $260 |
| Tier 2 | Austin, Amsterdam, Rotterdam, Berlin, Chicago | $190 |
| Tier 3 | All other cities | $150 |

### Meals and per diem

When you travel overnight you receive a flat meal per diem instead of claiming individual meals: $75 per day for domestic trips and $95 per day for international trips. No meal receipts are needed for the per diem. On the day you leave and the day you return you receive 75% of the daily rate.

### Ground transport and mileage

- Public transport and airport trains are preferred; taxis and ride-hailing are fine when they are the practical option.
- Using your own car for business trips is reimbursed at $0.67 per mile in the US and EUR 0.23 per kilometre in Europe. Commuting to your usual office is not a business trip.
- Rental cars should be compact or economy class. In the US, decline the rental company's collision insurance; Lumen's corporate policy covers it.

---pagebreak---

## Client entertainment and team events

Client entertainment is reimbursed up to $120 per person, including drinks, tax and tip. List every attendee and their company in the claim. Team events use the team event budget of $50 per person per quarter, which your manager holds. Alcohol is only reimbursable as part of client entertainment or an approved team event.

## Corporate cards

Employees who have completed 3 months of service and travel more than twice a year can request a Lumen Corporate Card from Finance Operations. The standard monthly limit is $5,000. Every transaction must be reconciled in Ledgerly within 7 days of the statement date; cards with transactions unreconciled for 30 days are suspended. Never use the corporate card for personal purchases, even if you intend to pay them back.

## What we do not reimburse

- Traffic fines, speeding tickets and parking fines.
- Hotel minibar, in-room movies and laundry on trips shorter than 5 nights.
- Upgrades to flights, trains or hotels that were not pre-approved.
- Personal grooming, clothing, luggage and travel pillows.
- Gym day passes while travelling (use the wellness stipend instead).
- Travel costs of family members or partners accompanying you.

## Contractors

Contractors do not use Ledgerly and are not eligible for the per diem or a corporate card. The rules for contractors are:

- Only expenses that were pre-approved in writing, in the statement of work (SOW) or by e-mail from the engagement manager, can be recharged to Lumen.
- Approved expenses are added as a separate line on the contractor's monthly invoice, with receipts attached, at cost and without any markup.
- Invoices, including the expense line, are paid on net 30 terms from the date a valid invoice is received.
- Travel for contractors is booked by their Lumen sponsor through TripDesk, so the contractor never pays for flights or hotels up front.

## Questions

Ask in #ask-finance on Slack or e-mail expenses@lumenfreight.example. Finance Operations answers within one business day.
""")

doc(
    "people/docs/benefits-overview.pdf",
    title="Benefits Overview 2026",
    author="Lumen Freight People Operations",
    header="Lumen Freight - Benefits Overview 2026",
)("""
# Benefits Overview 2026 (United States and Netherlands)

This overview summarises the benefits for employees in the United States (the Austin hub and remote US employees) and in the Netherlands (the Rotterdam hub and remote Dutch employees). Shanghai office benefits are described in the Chinese-language Shanghai office guide. Benefits start on your first day of employment; there is no waiting period.

## Health insurance in the United States

Medical cover is provided by Bluestone Health. You can choose between two plans:

- Bluestone PPO 500: a traditional plan with a $500 individual deductible and a broad provider network.
- Bluestone HDHP 2800: a high-deductible plan with a $2,800 individual deductible, paired with a health savings account (HSA).

Lumen pays 90% of the premium for employee-only coverage and 75% of the additional premium for dependants (spouse, domestic partner and children up to age 26).

### Health savings account

If you choose the HDHP, Lumen contributes to your HSA: $1,000 per year for individual coverage or $2,000 per year for family coverage. The contribution is paid in two equal instalments, in January and July. The HSA belongs to you and stays with you if you leave.

### Dental and vision

- Dental cover is provided by Bluestone Dental. Lumen pays 100% of the employee premium. The annual maximum benefit is $2,000 per covered person, and orthodontic treatment has a lifetime maximum of $1,500 for children under 19.
- Vision cover includes one eye exam per year and a $200 allowance for frames or contact lenses every 24 months.

## Health insurance in the Netherlands

Dutch basic health insurance is mandatory and is purchased individually. Lumen contributes a monthly health allowance of EUR 110 (gross) through payroll, and employees can join the VitaZorg collective contract, which gives a 5% discount on basic and supplementary cover.

---pagebreak---

## Retirement

### United States: 401(k)

Lumen offers a 401(k) plan administered by Keystone Retirement. New employees are auto-enrolled at a 3% contribution, which you can change or stop at any time. Lumen matches 100% of the first 4% of salary you contribute, and the match vests immediately.

### Netherlands: pension

Dutch employees join the PensioenPlus defined-contribution scheme. Lumen contributes 8% of pensionable salary and the employee contributes 4%, deducted from gross salary.

## Life insurance

US employees receive basic life insurance and accidental death cover of 2x annual base salary, up to $750,000, at no cost. You can buy supplemental cover for yourself and your family through Bluestone during enrolment.

## Wellbeing

- Wellness stipend: $60 per month (EUR 55 in the Netherlands) for gym memberships, fitness classes, sports equipment or meditation apps. Claim it through Ledgerly under the category "Wellness". The stipend is taxable and does not roll over between months.
- Employee assistance programme: MindBridge offers 6 free counselling sessions per issue per year, a 24/7 helpline and legal and financial advice. It is confidential and also available to members of your household.

## Learning and development

Every employee has a learning budget of $1,500 per calendar year (EUR 1,400 in the Netherlands) for courses, books, certifications and conference tickets. Requests above $500 need your manager's approval in advance. Unused budget does not roll over. All employees also get a licence for Skillshelf, our online learning library.

---pagebreak---

## Enrolment and changes

- New hires choose their plans within 30 days of their start date; otherwise they are enrolled in the default plan (Bluestone PPO 500, employee only).
- Open enrollment runs from 1 to 15 November each year, for coverage starting on 1 January.
- After a qualifying life event (marriage, birth or adoption, loss of other coverage) you can change your elections within 30 days of the event.

Enrol and make changes in the People portal under Benefits. Plan documents and summaries of benefits and coverage are available there too.

## Contractors

Contractors are not eligible for Lumen benefits: no health insurance, HSA contribution, retirement plan, life insurance, wellness stipend or learning budget. Contractors may attend internal tech talks, and their engagement manager can request a Skillshelf licence for them. Contractors engaged through the agency Crewline receive benefits from Crewline according to the agency's own plans.

## Contacts

- Benefits questions: benefits@lumenfreight.example or #ask-people.
- Bluestone member services: the phone number on the back of your member card.
- MindBridge helpline: see the Wellbeing page of the People portal.
""")

doc(
    "people/docs/remote-work-and-equipment.docx",
    title="Remote Work and Home Office Equipment Policy",
    author="Lumen Freight People Operations",
    header="Lumen Freight - Internal",
)("""
# Remote Work and Home Office Equipment Policy

Policy ID PPL-RW-003. Owners: People Operations and IT. This policy explains where you can work from, how we equip your home office, and what to do with equipment when you leave.

## Where you can work

Lumen Freight is remote-friendly. We have three hubs: **Austin** (United States), **Rotterdam** (Netherlands) and **Shanghai** (China). You can work from a hub, from home, or a mix of both. Employees may work fully remotely from any country where Lumen has a legal entity: the United States, Canada, the United Kingdom, the Netherlands, Germany, Spain and China.

### Working temporarily from another country

You may work for up to **30 working days per calendar year** from a country where Lumen has no legal entity. Submit the Work From Anywhere form (**WFA-2**) in the People portal at least **3 weeks** before you travel; People Operations checks tax and immigration rules before approving. Working from countries under international sanctions is never permitted.

### Core collaboration hours

Everyone is expected to be available for meetings during the core collaboration hours of **15:00 to 17:00 UTC**, Monday to Thursday. Outside those hours, plan your day as you like, in agreement with your team.

### Time together

There are no mandatory office days. Each team meets in person at one of the hubs for an offsite week twice a year; travel and accommodation are paid by Lumen under the travel policy.

## Equipment

### Laptop

Every employee chooses one of two standard laptops:

- MacBook Pro 14-inch (M3 Pro, 36 GB memory), or
- Lenovo ThinkPad X1 Carbon Gen 12, with Linux or Windows.

Laptops are refreshed every **3 years**. Engineers whose work involves heavy local builds may request a refresh after 2 years.

### Home office setup budget

New employees receive a one-time home office setup budget of **$750** (or local equivalent), to be used within their first 6 months. In addition, all employees receive a monthly internet and phone allowance of **$40**, paid through payroll. The setup budget is subject to the per-item limits below.

| Item | Spending limit | Notes |
| External monitor | $350 each | Up to 2 monitors |
| Ergonomic chair | $400 | |
| Headset | $120 | Noise-cancelling recommended |
| Keyboard and mouse | $150 | Combined |
| Standing desk | $500 | Paid outside the setup budget, only after an ergonomic assessment |

### How to order

Order equipment through the IT Store at it.lumenfreight.example/store. Delivery normally takes up to 10 business days. Equipment bought through the IT Store remains Lumen property. If you buy something yourself within the limits, expense it in Ledgerly under "Home office".

### Coworking spaces

Employees who live more than **50 km** from the nearest hub can expense a coworking membership of up to **$200 per month**.

## Security when working remotely

- Lock your screen whenever you step away; laptops lock automatically after 5 minutes.
- Do not let family members or friends use your work laptop.
- On public Wi-Fi, always connect through the LumenConnect VPN.
- Report a lost or stolen laptop or YubiKey to IT within **24 hours**, in #help-it or by phone on +1 512 555 0142, so that the device can be wiped remotely.

## Leaving Lumen

Return your laptop, YubiKey and any monitors within **14 days** of your last working day, using the prepaid shipping box that IT sends you. Chairs, desks, headsets, keyboards and mice are yours to keep.

## Contractors

Contractors normally use their own equipment and are not eligible for the setup budget, the internet allowance or coworking memberships. A Lumen-managed laptop is issued to a contractor only if they need access to production systems or customer data, and only after approval by the Security team. Contractors using their own devices must keep full-disk encryption enabled and the operating system up to date.
""")

doc(
    "people/docs/shanghai-office-guide-zh.docx",
    title="上海办公室指南：考勤与休假",
    author="Lumen Freight 上海人力资源",
    header="Lumen Freight 上海办公室 - 内部资料",
    lang="zh",
)("""
# 上海办公室指南：考勤与休假

本指南适用于路明货运科技（上海）有限公司的全体正式员工，介绍办公室基本信息、考勤打卡规则、各类假期以及日常福利。如与劳动合同或上海市相关法规不一致，以法律法规为准。

## 办公室基本信息

- 地址：上海市静安区南京西路1888号18楼。
- 办公时间：周一至周五 9:00–18:00。
- 弹性到岗：到岗时间可在 8:30–10:30 之间弹性安排，每天工作满 8 小时（含 1 小时午休）。
- 前台服务时间：8:30–19:00，行政前台分机 8018。

### 门禁卡与访客

新员工入职第一天在 18 楼前台领取门禁卡。门禁卡遗失须在企业微信提交补办申请，补办费用 **¥50**。接待访客须提前一天在企业微信“访客预约”中登记访客姓名和手机号。

## 考勤规则

### 打卡

所有员工使用 **企业微信** 打卡，上班、下班各打卡一次。忘记打卡的，可在企业微信中提交补卡申请，每月最多 **3 次**。超过 3 次的，按缺勤处理。

### 居家办公

上海办公室员工每周最多可居家办公 **2 天**，须在企业微信中提前一天提交申请并经直属经理批准。居家办公期间须在核心时间保持企业微信在线。

## 休假制度

### 年假

法定年假按累计工作年限计算：

- 累计工作满 1 年不满 10 年：5 天；
- 满 10 年不满 20 年：10 天；
- 满 20 年及以上：15 天。

在法定年假基础上，公司提供福利年假，使每位员工每年合计享有 **15 天带薪年假**（法定年假与福利年假合计）。当年未休完的年假可顺延至次年 **6 月 30 日**，逾期作废。

### 病假

每位员工每年享有 **5 天全薪病假**。超出部分按上海市规定计发病假工资。请病假须提供 **二级及以上医院** 出具的病假证明；单日病假可免于提供证明。

### 其他假期

| 假期类型 | 天数 | 所需材料 |
| 婚假 | 10 天（法定 3 天 + 公司额外 7 天） | 结婚证 |
| 产假 | 158 天 | 出生医学证明 |
| 陪产假 | 10 天 | 出生医学证明 |
| 育儿假 | 每年 5 天（子女未满 3 周岁） | 出生医学证明 |
| 丧假 | 3 天 | 无 |
| 团圆假 | 春节假期前额外 1 天 | 无 |

### 请假流程

1. 在企业微信“审批 → 请假”中提交申请，选择假期类型和日期。
2. 请假 3 天以内（含 3 天）由直属经理审批。
3. 请假超过 3 天的，经直属经理审批后还须由上海 HRBP 备案。
4. 请假结束返岗后，须在 2 个工作日内补交所需材料。

## 加班与调休

- 工作日加班须提前在企业微信“审批 → 加班”中申请，经直属经理批准后方可计入。
- 工作日加班和周末加班原则上安排 **调休**，调休须在加班后 **3 个月内** 使用完毕。
- 法定节假日加班按国家规定支付 **300%** 的加班工资。
- 晚上加班后回家的打车费用，按上海办公室费用报销政策执行。

## 日常福利

- 午餐补贴：每个工作日 **¥30**，每月初充值到员工饭卡。
- 下午茶：每周四下午 15:30 在 18 楼茶水间。
- 年度体检：每年一次，统一安排在 **9 月**。
- 社会保险与住房公积金：按上海市规定缴纳，住房公积金缴存比例为 **7%**。

## 联系人

- 上海 HRBP：陈晓，邮箱 shanghai-hr@lumenfreight.example。
- 行政与前台：分机 8018。
""")

# ============================== engineering ================================

doc(
    "engineering/docs/deploy-process.docx",
    title="Deploy Process for Lumen Dispatch Services",
    author="Lumen Freight Platform Engineering",
    header="Lumen Engineering - Internal",
)("""
# Deploy Process for Lumen Dispatch Services

Owner: Platform Engineering. Every service in the Lumen Dispatch platform is deployed with the `lumen-ship` CLI, which wraps our Kubernetes rollout tooling. Every deploy goes through the same path: staging, then a production canary, then full production. This page describes that path, the deploy windows and freezes, and how to roll back.

## Environments

| Environment | Cluster | Purpose |
| dev | k8s-dev-use2 | Per-branch preview environments, deleted automatically after 5 days |
| staging | k8s-stg-use2 | Production-like; anonymised data refreshed every Sunday |
| production-us | k8s-prod-use2 | Customers in the US data region |
| production-eu | k8s-prod-euc1 | Customers in the EU data region |

## Standard deploy steps

1. Merge your pull request into `main`. Merging requires one approving review and a green CI run. CI builds the container image, tags it with the git SHA and publishes a release ID such as `r-20251002-1432`.
2. Preview the change: `lumen-ship plan dispatch-api --env staging`.
3. Deploy to staging: `lumen-ship deploy dispatch-api --env staging`.
4. Let the release soak on staging for **30 minutes**. The automatic `staging-smoke` suite must pass before production is unlocked.
5. Start the production canary: `lumen-ship deploy dispatch-api --env production-us --canary 5`. This sends **5%** of traffic to the new version for **20 minutes**. Automated analysis compares error rate and p95 latency against the old version and aborts the canary if the error rate exceeds **1.5x** the baseline.
6. Promote: `lumen-ship promote dispatch-api --env production-us`. Traffic moves to the new version in three steps: 25%, 50%, 100%.
7. Repeat steps 5 and 6 for `production-eu`. EU deploys start at least **1 hour** after the US promotion completes.
8. `lumen-ship` posts each step to `#deploys` automatically; add a note if anything unusual happened.

## Rolling back

To roll back, run:

```
lumen-ship rollback dispatch-api --env production-us --to <release-id>
```

Use `lumen-ship history dispatch-api` to list recent release IDs. A rollback should complete in under **8 minutes**. Rollbacks never need approval, not even during a freeze: if in doubt, roll back first and investigate afterwards.

## Deploy windows and freezes

### Normal deploy windows

Production deploys are allowed Monday to Thursday from **08:00 to 20:00 UTC**, and on Friday from **08:00 to 14:00 UTC**. There are no production deploys at weekends. Staging deploys are allowed at any time.

### Freeze calendar

| Freeze | Dates | Reason |
| Peak season freeze | 24 November to 2 December | Black Friday and Cyber Monday delivery peak for customers |
| Year-end freeze | 18 December to 3 January | Reduced staffing over the holidays |
| Quarter-end freeze | Last 2 business days of each fiscal quarter | Customer invoicing and usage billing runs |

### Exceptions

A deploy during a freeze or outside the windows needs approval from both the **Release Captain** of the week and the **VP of Engineering**. Request it with `lumen-ship exception request dispatch-api --reason "..."`; the request is posted to `#release-captain` for approval. Fixes for an active SEV1 or SEV2 incident can be approved by the incident commander instead of the VP of Engineering.

## Database migrations

- Migrations must be backward compatible with the currently running code (expand, migrate, contract).
- Run them before deploying the code that depends on them: `lumen-ship migrate dispatch-api --env production-us`.
- Any migration that could hold a table lock for more than **5 seconds** needs a review from the DBRE team; add the `needs-dbre` label to the pull request.

## Feature flags

Risky or user-visible changes ship behind feature flags in **Semaphore**, our flag service. Example: `semaphore flag set route-v2-ui --percent 10`. Flags older than **90 days** are listed in the weekly flag-cleanup report and should be removed.

## The Release Captain

The Release Captain is a weekly rotating role among senior engineers. The Release Captain watches deploy health in `#deploys`, approves freeze exceptions together with the VP of Engineering, and can pause all production deploys with `lumen-ship pause --all` if the platform is unstable.
""")

doc(
    "engineering/docs/postmortem-template.docx",
    title="Postmortem Template",
    author="Lumen Freight Site Reliability Engineering",
    header="Lumen Engineering - Internal",
)("""
# Postmortem Template

Owner: Site Reliability Engineering. Copy this template into the Lumen Wiki space **ENG-PM** and name the page with the next free number, for example `PM-2025-041`. Postmortems at Lumen are **blameless**: we describe what the system and the process allowed to happen, never who is at fault. The deadlines for each severity are defined on the incident severity levels page.

## How to use this template

- The **author** is the incident commander or someone they delegate.
- At least one **reviewer** must be a Staff engineer from outside the affected team.
- Every postmortem is discussed in the weekly **Postmortem Review** meeting, held on **Wednesdays at 16:00 UTC**. Add your postmortem to the agenda at least one day before.
- When the postmortem is approved, post the link in `#postmortems`.

## 1. Summary

Two or three sentences: what happened, how long it lasted, who was affected, and how it was fixed. Write it for someone outside engineering.

## 2. Impact

Fill in the table. Use UTC for all times.

| Metric | Value |
| Start of impact (UTC) | |
| Time detected (UTC) | |
| End of impact (UTC) | |
| Total duration | |
| Customers affected | |
| Failed API requests | |
| SLA credits owed | |

## 3. Timeline

A list of timestamped events (UTC) from the first sign of trouble to full recovery. Copy the key entries from the scribe's log in the incident channel; include when alerts fired, when humans were paged, and when each mitigation was tried.

## 4. Root cause

Describe the technical root cause. Use the **Five Whys** technique: keep asking "why?" until you reach a cause that we can act on. Stop when the answer becomes "because people make mistakes"; the fix for that is always a better system.

## 5. Contributing factors

Things that made the incident more likely, longer or worse without being the root cause: missing alerts, confusing dashboards, an outdated runbook, a deploy during a busy period.

## 6. What went well and what went poorly

Two short lists. Recognise good work explicitly.

## 7. Action items

| Action | Owner | Priority | Ticket | Due date |
| | | | | |

Action items are tracked in the Jira project **REL**. Priorities:

- **P0**: must be completed within **14 days**.
- **P1**: must be completed within **30 days**.
- **P2**: best effort, reviewed again next quarter.

SRE reports overdue P0 and P1 items every month to the VP of Engineering.

## 8. Lessons learned

What would you tell another team so that they do not have the same incident?

## Example: PM-2025-027, optimizer queue saturation

### Summary

On 12 August 2025 route optimization jobs queued for up to 25 minutes because a customer's bulk import created 9,400 optimization requests in ten minutes and the optimizer workers did not autoscale. Customer impact lasted **47 minutes**.

### Impact

| Metric | Value |
| Start of impact (UTC) | 07:42 |
| Time detected (UTC) | 07:51 |
| End of impact (UTC) | 08:29 |
| Total duration | 47 minutes |
| Customers affected | 312 |

### Action items

| Action | Owner | Priority | Ticket | Due date |
| Autoscale optimizer workers on queue depth | Routing team | P0 | REL-2291 | 26 August 2025 |
| Per-account queue fairness | Routing team | P1 | REL-2292 | 11 September 2025 |
| Alert on queue age above 5 minutes | SRE | P1 | REL-2293 | 11 September 2025 |
""")

doc(
    "engineering/docs/database-failover-runbook.pdf",
    title="Runbook: Dispatch Database Failover",
    author="Lumen Freight Database Reliability Engineering",
    header="Lumen Engineering Runbook - dispatch-db-prod",
)("""
# Runbook: Dispatch Database Failover

Owner: Database Reliability Engineering (DBRE). Service: dispatch-db-prod. Klaxon escalation policy: dbre-escalation. Read the whole runbook once before you need it; during an incident, follow the steps in order and post each command you run in the incident channel.

## Topology

dispatch-db-prod is a PostgreSQL 15 cluster managed by Patroni, with etcd as the consensus store. It holds all orders, routes, drivers and proof-of-delivery metadata for the US data region.

- Primary: dispatch-db-prod-0, in availability zone us-east-2a.
- Synchronous replica: dispatch-db-prod-1, in us-east-2b. This is the normal failover candidate.
- Asynchronous replica: dispatch-db-prod-2, in us-east-2c, used for read-only reporting traffic.
- Disaster recovery replica: dispatch-db-dr-0, in us-west-2, asynchronous and cross-region.

Applications never connect to a database node directly. They connect through the PgBouncer pool at pgbouncer.db.internal.lumenfreight.example on port 6432, which runs as 4 pods.

### Recovery objectives

| Scenario | RPO (data loss) | RTO (time to recover) |
| In-region failover | 0 (synchronous replica) | 15 minutes |
| Cross-region DR failover | Up to 60 seconds | 60 minutes |

## When to fail over

Patroni fails over automatically when the primary's leader key in etcd expires, which happens 30 seconds after the primary stops renewing it. You only need this runbook when:

- automatic failover did not happen or did not complete;
- the primary is badly degraded but still holds the leader lock, for example disk I/O latency above 500 ms sustained for 5 minutes;
- the whole us-east-2 region is unavailable (see the cross-region procedure on page 3).

For planned maintenance, do not use failover: use a Patroni switchover during a deploy window.

### When NOT to fail over

- The problem is PgBouncer or the network between applications and the database. Check the PgBouncer dashboard first.
- The synchronous replica is not in the state "Sync Standby" or shows any replication lag.
- A pg_repack or large migration is running and DBRE has not been consulted.

---pagebreak---

## Procedure: in-region manual failover

1. Declare an incident: SEV1 if writes are failing for customers, otherwise SEV2. Page DBRE with: klaxon page --service dispatch-db --message "manual failover needed"
2. Put the API into maintenance mode so that writes fail cleanly instead of timing out: lumen-ship maintenance on dispatch-api --env production-us. Clients receive HTTP 503 during maintenance.
3. Check the cluster state: patronictl -c /etc/patroni/dispatch.yml list. Confirm that dispatch-db-prod-1 shows the role Sync Standby and a lag of 0.
4. Fail over to the synchronous replica: patronictl -c /etc/patroni/dispatch.yml failover dispatch-db-prod --candidate dispatch-db-prod-1 --force
5. Wait until dispatch-db-prod-1 reports the role Leader. This normally takes less than 30 seconds. Run the list command again to confirm.
6. Repoint PgBouncer to the new primary: dbctl repoint-pgbouncer --cluster dispatch-db-prod. The command reloads all 4 PgBouncer pods one at a time.
7. Verify writes. Connect through PgBouncer with psql and run SELECT pg_is_in_recovery(); which must return f (false). Then run dbctl smoke --cluster dispatch-db-prod, which writes and reads back a row in the healthcheck table.
8. Leave maintenance mode: lumen-ship maintenance off dispatch-api --env production-us
9. Post the timestamps of each step in the incident channel for the postmortem.

An in-region failover done this way typically takes 6 to 10 minutes from step 2 to step 8.

### If the failover command fails

- If patronictl reports that the candidate is not healthy, do not force a different candidate. Escalate to the DBRE manager through the dbre-escalation policy.
- If PgBouncer pods fail to reload, restart them with kubectl rollout restart deployment/pgbouncer -n db. Connections drop for about 20 seconds.
- Never promote the asynchronous replica dispatch-db-prod-2 while the synchronous replica is available: it may be missing recent transactions.

---pagebreak---

## Procedure: cross-region DR failover

Use this only when us-east-2 is unavailable or both in-region replicas are lost. A DR failover can lose up to 60 seconds of writes, so it requires explicit approval from the VP of Engineering or the CTO, recorded in the incident channel before step 3.

1. Measure the data-loss window: dbctl dr-lag --region us-west-2. The output is the replication lag in seconds.
2. Report the lag in the incident channel and get approval.
3. Promote the DR replica: dbctl promote-dr --cluster dispatch-db-prod --region us-west-2
4. The promote command updates the CNAME record db.internal.lumenfreight.example, which has a TTL of 60 seconds. Wait at least 2 minutes before testing.
5. Move application traffic to the standby region: lumen-ship region-failover dispatch-api --to us-west-2
6. Verify with the same checks as in step 7 of the in-region procedure.

## After any failover

- Rebuild the old primary as a replica: dbctl rebuild-replica --node dispatch-db-prod-0. The rebuild uses pg_basebackup and takes about 2 hours for the current 1.8 TB dataset.
- Until the rebuild finishes, the cluster runs without a synchronous replica. Watch replication dashboards and keep the DBRE secondary on call.
- A postmortem is always required after a manual failover, whatever the incident severity.

## Contacts

- Slack: #dbre
- Klaxon schedule: dbre-primary; escalation policy: dbre-escalation
- Approvals for DR failover: VP of Engineering or CTO
""")

# ============================== product ====================================

doc(
    "product/docs/api-reference.pdf",
    title="Lumen Dispatch REST API Reference (v2)",
    author="Lumen Freight Developer Relations",
    header="Lumen Dispatch API Reference v2",
)("""
# Lumen Dispatch REST API Reference (v2)

The Lumen Dispatch API lets you create orders, start route optimizations, read vehicles and drivers, and receive webhooks when deliveries happen. It is a JSON API over HTTPS (TLS 1.2 or later). All timestamps are ISO 8601 in UTC.

## Base URLs

- Production: https://api.lumenfreight.example/v2
- Sandbox: https://sandbox-api.lumenfreight.example/v2 (use test keys; no SMS or e-mail is ever sent from the sandbox)

## Authentication

### API keys

Create API keys in the web app under Settings > Developers > API keys. Live keys start with lf_live_ and test keys start with lf_test_. A key is shown only once, when it is created. Each account can have at most 10 active keys.

Send the key in the Authorization header:

```
Authorization: Bearer lf_live_2f9c...
```

Each key has one or more scopes: orders:read, orders:write, routes:write, vehicles:read and webhooks:manage. A request that needs a scope the key does not have fails with insufficient_scope.

### OAuth 2.0 (Enterprise plan)

Enterprise accounts can also use the OAuth 2.0 client credentials grant. Request a token from https://auth.lumenfreight.example/oauth/token with your client ID and secret. Access tokens are valid for 3600 seconds (1 hour); request a new one before expiry. Refresh tokens are not issued for this grant.

## Official SDKs

- Python: pip install lumen-dispatch
- Node.js: npm install @lumenfreight/dispatch

---pagebreak---

## Endpoints

| Method | Path | Description |
| GET | /vehicles | List vehicles |
| GET | /drivers | List drivers |
| POST | /orders | Create an order |
| GET | /orders/{order_id} | Retrieve an order |
| PATCH | /orders/{order_id} | Update an order |
| POST | /routes/optimize | Start an optimization job |
| GET | /jobs/{job_id} | Get the status of a job |
| GET | /routes?date=YYYY-MM-DD | List the routes for a day |
| POST | /webhooks | Register a webhook endpoint |

### Pagination

List endpoints use cursor pagination. Pass limit (default 50, maximum 200) and the next_cursor value from the previous response. When next_cursor is null you have reached the last page.

### Idempotency

POST requests accept an Idempotency-Key header. Lumen remembers each key for 24 hours and returns the original response if the same request is retried. Reusing a key with a different request body returns HTTP 409 with the error code idempotency_conflict.

### Optimization jobs

POST /routes/optimize is asynchronous. It returns HTTP 202 with a job_id; poll GET /jobs/{job_id} until the status is succeeded or failed (other statuses are queued and running), or subscribe to the job.succeeded webhook. Each account can run at most 10 optimization jobs concurrently. Job results are kept for 7 days.

---pagebreak---

## Rate limits

Rate limits are applied per account, across all of the account's API keys.

| Plan | Requests per minute |
| Starter | 60 |
| Growth | 600 |
| Enterprise | 3,000 |

Every response includes the headers X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset. When you exceed the limit, the API returns HTTP 429 with the error code rate_limited and a Retry-After header giving the number of seconds to wait. Use exponential backoff with jitter. If you need a temporary increase, for example during a data migration, contact support with your account ID.

## Errors

Errors use conventional HTTP status codes and a JSON body:

```
{"error": {"code": "infeasible_plan", "message": "...", "request_id": "req_8XK2..."}}
```

| HTTP status | Error code | Meaning |
| 400 | invalid_request | Malformed JSON or a missing required field |
| 401 | invalid_api_key | Key missing, revoked, or used against the wrong environment |
| 403 | insufficient_scope | The key lacks the scope needed for this endpoint |
| 404 | not_found | The resource does not exist in your account |
| 409 | idempotency_conflict | Idempotency key reused with a different body |
| 422 | unroutable_address | The address could not be geocoded |
| 422 | infeasible_plan | The constraints cannot all be satisfied, e.g. time windows too short |
| 429 | rate_limited | Too many requests; see Retry-After |
| 500 | internal_error | Unexpected error; quote the request_id to support |
| 503 | optimizer_unavailable | The optimizer is temporarily unavailable; retry later |

---pagebreak---

## Webhooks

Register an HTTPS endpoint with POST /webhooks and choose the events you want: route.completed, stop.arrived, stop.failed, order.delivered and job.succeeded.

### Verifying signatures

Every webhook request carries an X-Lumen-Signature header of the form t=<timestamp>,v2=<signature>. The signature is an HMAC-SHA256 of the timestamp and the raw request body, keyed with your endpoint's signing secret. Reject requests whose timestamp is more than 5 minutes old to prevent replay attacks.

### Retries

Your endpoint must return a 2xx status within 10 seconds. Failed deliveries are retried up to 8 times over 24 hours with exponential backoff. After the last retry fails, the endpoint is marked as failing and the account owner receives an e-mail.

## Versioning and deprecation

Additive changes (new endpoints, new optional fields, new event types) are made without a version change, so your client must ignore unknown fields. Breaking changes get a new major version. API v1 is deprecated and will be sunset on 30 June 2026; after that date, v1 requests return HTTP 410 Gone. See the migration guide in the developer portal.
""")

doc(
    "product/docs/integrations.docx",
    title="Lumen Dispatch Integrations",
    author="Lumen Freight Product Management",
    header="Lumen Dispatch Documentation",
)("""
# Lumen Dispatch Integrations

Lumen Dispatch connects to the systems where your orders come from, where your vehicles report their position, and where your finance team invoices. Integrations are managed by account owners under **Settings > Integrations**. This page lists the available integrations, the plans that include them and how each one is set up.

## Integration catalogue

| Integration | Category | Available on | Sync |
| Shopify | E-commerce | Growth, Enterprise | New orders every 5 minutes; fulfilment written back on delivery |
| WooCommerce | E-commerce | Growth, Enterprise | New orders every 15 minutes |
| QuickBooks Online | Accounting | Growth, Enterprise | Delivered orders pushed as invoices nightly |
| NetSuite | ERP | Enterprise | Nightly at 01:00 in the account's time zone, plus on demand |
| SAP S/4HANA | ERP | Enterprise | Every 30 minutes through SAP Integration Suite |
| Samsara | Telematics | Growth, Enterprise | Vehicle positions every 30 seconds |
| Geotab | Telematics | Growth, Enterprise | Continuous stream through the Geotab Data Feed |
| Zapier | Automation | Growth, Enterprise | Event-driven |
| Slack | Notifications | All plans | Event-driven |

## Shopify

### Setting up Shopify

1. In Lumen Dispatch, go to Settings > Integrations > Shopify and click **Connect**.
2. You are redirected to the Shopify App Store to install the **Lumen Dispatch Connector** app. Approve the permissions `read_orders` and `write_fulfillments`.
3. Choose which Shopify shipping methods create Lumen orders, for example "Local delivery".
4. Map each Shopify location to a Lumen depot.

### Good to know

- Orders tagged `no-lumen` in Shopify are skipped.
- A single Lumen account can connect up to **5 Shopify stores**, which is useful for Shopify Plus merchants with regional stores.
- When a delivery is completed, the Shopify order is marked fulfilled and the tracking link is added to the fulfilment.

## Telematics: Samsara and Geotab

When a telematics integration is connected, vehicle positions on the live map come from the vehicle's telematics device instead of the driver's phone. Drivers still need the Lumen Driver app for their stop list and proof of delivery.

### Samsara

Create a Samsara API token with the scopes **Read Vehicles** and **Read Locations**, then paste it into Settings > Integrations > Samsara. One Samsara connection supports up to **500 vehicles**; larger fleets can add several connections. Vehicles are matched by VIN.

### Geotab

Create a dedicated MyGeotab service account with read-only access, and enter the database name, user name and password in Lumen. Vehicles are matched by the Geotab device serial number.

## ERP integrations

### NetSuite

Install the SuiteApp **Lumen Dispatch for NetSuite** from the SuiteApp marketplace. Sales orders with the status "Pending Fulfillment" are imported as Lumen orders. When a delivery is completed, Lumen creates an item fulfillment record in NetSuite with the proof-of-delivery PDF attached.

### SAP S/4HANA

The SAP integration runs as an iFlow in SAP Integration Suite and requires an SAP BTP subaccount. It is implemented by Lumen's professional services team; a typical project takes **6 to 8 weeks**.

## Zapier

The Lumen Dispatch Zapier app offers the triggers **Route Completed**, **Delivery Failed** and **Order Delivered**, and the actions **Create Order** and **Update Order**. Use it to connect to tools that have no native integration.

## Slack

Connect a Slack workspace to post delivery exceptions (failed deliveries, late stops) to a channel of your choice. Dispatchers can also type `/lumen eta <order number>` in Slack to get the current ETA of an order.

## Troubleshooting

The **Integration Health** page (Settings > Integrations > Health) shows the last successful sync and recent errors for each integration.

| Error | Meaning | What to do |
| INT-401 | The partner system rejected the stored credentials | Reconnect the integration with a valid token or password |
| INT-404 | A mapped location, depot or item no longer exists | Review the mappings in the integration settings |
| INT-429 | The partner system's API rate limit was reached | No action needed; Lumen backs off and retries automatically |
""")

# ============================== finance ====================================

doc(
    "finance/docs/fy2027-board-financial-plan.pdf",
    title="FY2027 Financial Plan - Board Approved",
    author="Lumen Freight Office of the CFO",
    header="CONFIDENTIAL - Lumen Freight FY2027 Financial Plan",
)("""
# FY2027 Financial Plan (Board Approved)

CONFIDENTIAL. Prepared by the Office of the CFO. Approved by the Board of Directors on 22 January 2026. Fiscal year FY2027 runs from 1 February 2026 to 31 January 2027. All figures in US dollars.

## Summary

| Metric | FY2026 actual | FY2027 plan |
| Recognised revenue | $63.8M | $84.5M |
| Gross margin | 75% | 78% |
| Total operating expenses | $61.0M | $69.3M |
| EBITDA | -$13.1M | -$3.4M |
| EBITDA margin | -21% | -4% |
| Free cash flow | -$15.7M | -$9.8M |
| Ending cash | $58.9M | $49.1M |

The plan reaches EBITDA breakeven on a monthly basis in Q4 FY2027 and assumes no new equity financing. A Series D, if completed, is upside to this plan and is not included in the ending cash figure.

## Headcount

Headcount grows from 402 to 465 employees, a net increase of 63.

| Function | Start of FY2027 | End of FY2027 |
| Research and development | 168 | 190 |
| Sales and marketing | 118 | 142 |
| Customer success and support | 64 | 72 |
| General and administrative | 52 | 61 |

Hiring guardrail: if Q2 FY2027 bookings land below 85% of plan, all open G&A requisitions are paused and sales hiring is reviewed by the CEO and CFO.

---pagebreak---

## Operating expense budget

| Function | FY2027 budget | Share of revenue |
| Research and development | $27.9M | 33% |
| Sales and marketing | $26.2M | 31% |
| Customer success (operating portion) | $4.2M | 5% |
| General and administrative | $11.0M | 13% |
| Total | $69.3M | 82% |

Capital expenditure is budgeted at $2.4M, mainly laptops and the fit-out of the expanded Shanghai office.

## Key assumptions

- A 7% list price increase on Growth plan renewals from 1 April 2026.
- Cloud hosting costs fall to 11% of revenue, from 13% in FY2026, after the reserved-capacity commitment signed in December 2025.
- Exchange rates: EUR/USD 1.08 and USD/CNY 7.15.
- No acquisitions are included in the base plan.

---pagebreak---

## Scenarios

| Scenario | Revenue | EBITDA | Main actions |
| Downside | $78.0M | -$5.9M | Delay 25 hires to H2; cut marketing programs by $2.5M |
| Base (this plan) | $84.5M | -$3.4M | As budgeted |
| Upside | $89.0M | -$0.8M | Pull forward 10 sales hires into Q2 |

The downside scenario is triggered automatically if the Q2 reforecast projects full-year revenue below $80.0M.

## Board reporting cadence

- Monthly flash report to the board by the 8th business day after month end.
- Quarterly board meetings, with a full reforecast presented at the end of Q2 (July 2026).
- The Audit Committee reviews the plan-versus-actual variance every quarter.
""")

doc(
    "finance/docs/budget-approval-thresholds.docx",
    title="Budget and Spend Approval Thresholds",
    author="Lumen Freight Office of the CFO",
    header="CONFIDENTIAL - Lumen Freight Finance",
)("""
# Budget and Spend Approval Thresholds

Owner: Office of the CFO. Effective **1 February 2026** (start of FY2027). This policy sets who must approve purchase commitments: purchase orders, contracts, SaaS subscriptions, agency and consulting engagements. It does not cover employee expense claims, which follow the expenses policy in the People handbook.

## Approval matrix

The value of a commitment is its **total contract value** (TCV) over the full term, including taxes that cannot be recovered. Each level requires the approvals of all the levels below it.

| Commitment value (TCV) | Required approvers |
| Up to $10,000 | Budget owner (cost center manager) |
| $10,000.01 to $50,000 | Budget owner and department VP |
| $50,000.01 to $250,000 | Budget owner, department VP and CFO |
| $250,000.01 to $1,000,000 | All of the above and the CEO |
| Above $1,000,000 | All of the above and the Audit Committee of the Board |

## Additional rules

### Multi-year contracts

Multi-year commitments are valued at their full TCV, not the annual amount. Any contract with a TCV above **$100,000** also needs review by Legal before signature.

### Unbudgeted spend

Spend that is not in the approved FY2027 budget needs CFO approval whenever it exceeds **$5,000**, regardless of the matrix above.

### Headcount

New headcount that is not in the FY2027 plan requires approval from both the CFO and the CEO. Backfills of planned roles only need the department VP.

### No splitting

Splitting a purchase into smaller orders to stay below a threshold is prohibited and is treated as a disciplinary matter.

## Procurement process

1. Raise a purchase request in **Procura**, our procurement tool, with the vendor quote attached.
2. Procura routes the request to the approvers required by the matrix.
3. Vendors that will process customer data must also pass a security review (the Vendor Security Questionnaire) before the contract is signed.
4. Finance aims to complete its part of the review within **3 business days**.

## Delegation

An approver who is on leave may delegate approvals in Procura to a direct report one level below them, for at most **15 business days**. The CFO's and CEO's approvals cannot be delegated.

## Renewals and amendments

- A renewal is a new commitment: it is approved again at the level that matches the renewal's TCV, even if the vendor and price are unchanged.
- Auto-renewal clauses must be flagged in Procura. Budget owners receive a reminder **90 days** before any auto-renewal date so that they can cancel or renegotiate.
- An amendment that increases the value of an existing contract is approved at the level of the new total value, not the increase alone.

## Worked examples

- A one-year analytics SaaS subscription at $8,400 per year: up to $10,000, so the budget owner alone can approve it.
- A three-year observability contract at $40,000 per year: the TCV is $120,000, so it needs the budget owner, the department VP and the CFO, plus a Legal review because it exceeds $100,000.
- A $6,000 conference sponsorship that was not in the marketing budget: within the budget owner's limit, but it is unbudgeted spend above $5,000, so the CFO must also approve it.

## Exceptions and audit

Exceptions to this policy can only be granted by the CFO, in writing, and are logged in Procura. Internal audit samples approved commitments every quarter and reports any breach to the Audit Committee.
""")


# --------------------------------------------------------------------------
# Parsing the notation
# --------------------------------------------------------------------------


def parse_blocks(src: str) -> list[tuple]:
    """Turn the notation into a list of blocks: (kind, payload)."""
    blocks: list[tuple] = []
    para: list[str] = []
    table: list[list[str]] = []
    code: list[str] | None = None

    def flush():
        nonlocal para, table
        if para:
            blocks.append(("p", " ".join(para)))
            para = []
        if table:
            blocks.append(("table", table))
            table = []

    for raw in src.strip("\n").splitlines():
        line = raw.rstrip()
        if code is not None:
            if line.strip() == "```":
                blocks.append(("code", "\n".join(code)))
                code = None
            else:
                code.append(line)
            continue
        if line.strip() == "```":
            flush()
            code = []
        elif not line.strip():
            flush()
        elif line == "---pagebreak---":
            flush()
            blocks.append(("pagebreak", None))
        elif line.startswith("### "):
            flush()
            blocks.append(("h3", line[4:]))
        elif line.startswith("## "):
            flush()
            blocks.append(("h2", line[3:]))
        elif line.startswith("# "):
            flush()
            blocks.append(("h1", line[2:]))
        elif line.startswith("- "):
            flush()
            blocks.append(("bullet", line[2:]))
        elif re.match(r"^\d+\. ", line):
            flush()
            num, text = line.split(" ", 1)
            blocks.append(("number", (num, text)))
        elif line.startswith("|"):
            if para:
                blocks.append(("p", " ".join(para)))
                para = []
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            table.append(cells)
        else:
            if table:
                flush()
            para.append(line.strip())
    flush()
    if code is not None:
        raise ValueError("unterminated code block")
    return blocks


def plain(text: str) -> str:
    return text.replace("**", "").replace("`", "")


def inline_runs(text: str) -> list[tuple[str, bool, bool]]:
    """Split text into (segment, bold, code) runs for **bold** and `code`."""
    runs = []
    for part in re.split(r"(\*\*[^*]+\*\*|`[^`]+`)", text):
        if not part:
            continue
        if part.startswith("**") and part.endswith("**"):
            runs.append((part[2:-2], True, False))
        elif part.startswith("`") and part.endswith("`"):
            runs.append((part[1:-1], False, True))
        else:
            runs.append((part, False, False))
    return runs


# --------------------------------------------------------------------------
# PDF rendering (fpdf2)
# --------------------------------------------------------------------------


def render_pdf(meta: dict, blocks: list[tuple], out: Path) -> None:
    from fpdf import FPDF

    class PolicyPDF(FPDF):
        def header(self):
            self.set_font("Helvetica", "I", 8)
            self.set_text_color(120, 120, 120)
            self.cell(0, 6, meta["header"], align="R", new_x="LMARGIN", new_y="NEXT")
            self.ln(2)
            self.set_text_color(0, 0, 0)

        def footer(self):
            self.set_y(-14)
            self.set_font("Helvetica", "I", 8)
            self.set_text_color(120, 120, 120)
            self.cell(0, 8, f"Page {self.page_no()} of {{nb}}", align="C")
            self.set_text_color(0, 0, 0)

    pdf = PolicyPDF(format="A4")
    pdf.set_margins(20, 18, 20)
    pdf.set_auto_page_break(True, margin=20)
    pdf.set_creation_date(FIXED_DATE)
    pdf.set_title(meta["title"])
    pdf.set_author(meta["author"])
    pdf.set_subject("Lumen Freight sample knowledge base document")
    pdf.set_creator("scripts/make_sample_docs.py")
    pdf.set_producer("fpdf2")
    pdf.set_lang("en")
    pdf.add_page()

    def text_block(text: str, size: float = 10.5, style: str = "", indent: float = 0):
        pdf.set_font("Helvetica", style, size)
        pdf.set_x(pdf.l_margin + indent)
        pdf.multi_cell(pdf.epw - indent, size * 0.5, plain(text), align="L", new_x="LMARGIN", new_y="NEXT")

    for kind, payload in blocks:
        if kind == "h1":
            pdf.start_section(plain(payload), level=0)
            text_block(payload, 18, "B")
            pdf.ln(3)
        elif kind == "h2":
            pdf.ln(3)
            pdf.start_section(plain(payload), level=1)
            text_block(payload, 14, "B")
            pdf.ln(1.5)
        elif kind == "h3":
            pdf.ln(1.5)
            pdf.start_section(plain(payload), level=2)
            text_block(payload, 12, "B")
            pdf.ln(1)
        elif kind == "p":
            text_block(payload)
            pdf.ln(2)
        elif kind == "bullet":
            text_block("- " + payload, indent=4)
            pdf.ln(0.8)
        elif kind == "number":
            num, text = payload
            text_block(f"{num} {text}", indent=4)
            pdf.ln(0.8)
        elif kind == "code":
            pdf.set_font("Courier", "", 9.5)
            pdf.set_fill_color(242, 242, 242)
            pdf.multi_cell(0, 5, payload, fill=True, align="L", new_x="LMARGIN", new_y="NEXT")
            pdf.ln(2)
        elif kind == "table":
            pdf.set_font("Helvetica", "", 9.5)
            with pdf.table(text_align="LEFT", line_height=5.5, first_row_as_headings=True) as table:
                for row in payload:
                    r = table.row()
                    for cell in row:
                        r.cell(plain(cell))
            pdf.ln(3)
        elif kind == "pagebreak":
            pdf.add_page()
    out.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(out))


# --------------------------------------------------------------------------
# DOCX rendering (python-docx)
# --------------------------------------------------------------------------


def _set_east_asian_font(style, font_name: str) -> None:
    from docx.oxml.ns import qn

    rpr = style.element.get_or_add_rPr()
    rfonts = rpr.find(qn("w:rFonts"))
    if rfonts is None:
        rfonts = rpr.makeelement(qn("w:rFonts"), {})
        rpr.append(rfonts)
    rfonts.set(qn("w:eastAsia"), font_name)


def _add_runs(paragraph, text: str) -> None:
    from docx.shared import Pt

    for segment, bold, code in inline_runs(text):
        run = paragraph.add_run(segment)
        if bold:
            run.bold = True
        if code:
            run.font.name = "Consolas"
            run.font.size = Pt(10)


def render_docx(meta: dict, blocks: list[tuple], out: Path) -> None:
    import docx
    from docx.enum.text import WD_ALIGN_PARAGRAPH
    from docx.shared import Pt

    d = docx.Document()
    if meta["lang"] == "zh":
        for name in ("Normal", "Heading 1", "Heading 2", "Heading 3", "Title"):
            _set_east_asian_font(d.styles[name], "Microsoft YaHei")

    cp = d.core_properties
    cp.title = meta["title"]
    cp.author = meta["author"]
    cp.last_modified_by = meta["author"]
    cp.subject = "Lumen Freight sample knowledge base document"
    cp.keywords = "Lumen Freight; sample; knowledge base"
    cp.comments = "Generated by scripts/make_sample_docs.py"
    cp.language = "zh-CN" if meta["lang"] == "zh" else "en-US"
    cp.revision = 1
    cp.created = FIXED_DATE.replace(tzinfo=None)
    cp.modified = FIXED_DATE.replace(tzinfo=None)
    cp.last_printed = FIXED_DATE.replace(tzinfo=None)

    if meta["header"]:
        hp = d.sections[0].header.paragraphs[0]
        hp.text = meta["header"]
        hp.alignment = WD_ALIGN_PARAGRAPH.RIGHT

    for kind, payload in blocks:
        if kind in ("h1", "h2", "h3"):
            level = int(kind[1])
            h = d.add_heading(level=level)
            _add_runs(h, payload.replace("**", ""))
        elif kind == "p":
            _add_runs(d.add_paragraph(), payload)
        elif kind == "bullet":
            _add_runs(d.add_paragraph(style="List Bullet"), payload)
        elif kind == "number":
            _add_runs(d.add_paragraph(style="List Number"), payload[1])
        elif kind == "code":
            for line in payload.splitlines():
                p = d.add_paragraph(style="No Spacing")
                run = p.add_run(line)
                run.font.name = "Consolas"
                run.font.size = Pt(9.5)
        elif kind == "table":
            ncols = max(len(r) for r in payload)
            t = d.add_table(rows=len(payload), cols=ncols)
            t.style = d.styles["Table Grid"]
            for i, row in enumerate(payload):
                for j in range(ncols):
                    cell = t.cell(i, j)
                    text = row[j] if j < len(row) else ""
                    para = cell.paragraphs[0]
                    _add_runs(para, text)
                    if i == 0:
                        for run in para.runs:
                            run.bold = True
            d.add_paragraph()
        elif kind == "pagebreak":
            d.add_page_break()

    buf = io.BytesIO()
    d.save(buf)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(normalise_zip(buf.getvalue()))


def normalise_zip(data: bytes) -> bytes:
    """Rewrite a ZIP with fixed timestamps and attributes (byte-stable output)."""
    src = zipfile.ZipFile(io.BytesIO(data))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            zi = zipfile.ZipInfo(info.filename, date_time=ZIP_DATE)
            zi.compress_type = zipfile.ZIP_DEFLATED
            zi.external_attr = 0o644 << 16
            zi.create_system = 0
            dst.writestr(zi, src.read(info.filename))
    return buf.getvalue()


# --------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="only generate paths containing this substring")
    args = ap.parse_args(argv)
    for rel, meta in DOCS.items():
        if args.only and args.only not in rel:
            continue
        out = KB_DIR / rel
        blocks = parse_blocks(meta["source"])
        if out.suffix == ".pdf":
            if meta["lang"] != "en":
                raise SystemExit(f"{rel}: PDFs use core fonts; only English content is supported")
            render_pdf(meta, blocks, out)
        elif out.suffix == ".docx":
            render_docx(meta, blocks, out)
        else:
            raise SystemExit(f"{rel}: unsupported output type")
        print(f"wrote {out.relative_to(ROOT)} ({out.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
